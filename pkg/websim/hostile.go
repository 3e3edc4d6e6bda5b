package websim

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/andybalholm/brotli"
)

// The hostile kinds a generated web mixes among its pages when
// WebConfig.HostileEvery is set. Each is a way a page can try to exhaust a
// crawler or poison its stores: the hostile inputs that
// a web can serve, those of the grid's hostile tests, and more of the same
// families.
const (
	// HostileAmplifyBase is a 60 KB page with a <base href> of an 8 KB path
	// and 5,000 short links: 40 MB of links once resolved, unless the
	// crawler caps the resolved URL length.
	HostileAmplifyBase = "amplify-base"
	// HostileAmplifyUnder is the same with a 1,900-byte base, so every
	// resolved link stays just under a 2,048-byte URL cap and only a cap on
	// the link bytes per document bounds it.
	HostileAmplifyUnder = "amplify-under-cap"
	// HostileLongLinks is a page of 200 absolute links of 3 KB each.
	HostileLongLinks = "long-links"
	// HostileManyLinks is a page of 5,000 links to pages of the web, most
	// of them repeated.
	HostileManyLinks = "many-links"
	// HostileManyImages is a page of 3,000 images with long sources and
	// alternative texts.
	HostileManyImages = "many-images"
	// HostileLongMeta is a page whose title, description, keywords and
	// author are 50 KB each.
	HostileLongMeta = "long-metadata"
	// HostileLongWord is a page whose text is one 200 KB word.
	HostileLongWord = "long-word"
	// HostileContentType is an ordinary page served with a 40 KiB
	// Content-Type header (over Elasticsearch's 32 KiB term limit).
	HostileContentType = "huge-content-type"
	// HostileHeaders is an ordinary page with 60 KiB of response headers,
	// just under the loader's 64 KiB limit.
	HostileHeaders = "huge-headers"
	// HostileHeadersOver is an ordinary page with 80 KiB of response
	// headers, over the loader's limit.
	HostileHeadersOver = "headers-over-limit"
	// HostileGzip, HostileXGzip, HostileDeflate and HostileBrotli are
	// ordinary pages in each coding the loader offers.
	HostileGzip    = "gzip"
	HostileXGzip   = "x-gzip"
	HostileDeflate = "deflate"
	HostileBrotli  = "br"
	// HostileGzipBomb is 256 MiB of zeros in about 250 KB of gzip.
	HostileGzipBomb = "gzip-bomb"
	// HostileDeflateBomb is 64 MiB of zeros in zlib-wrapped DEFLATE.
	HostileDeflateBomb = "deflate-bomb"
	// HostileBrotliBomb is 256 MiB of zeros in brotli.
	HostileBrotliBomb = "br-bomb"
	// HostileStackedCodings is the gzip bomb wrapped once more in gzip
	// and declared as two codings.
	HostileStackedCodings = "stacked-codings"
	// HostileUnknownCoding is gzip bytes declared "compress", a coding the
	// loader does not offer.
	HostileUnknownCoding = "unknown-coding"
	// HostileBadGzip is plain HTML declared gzip.
	HostileBadGzip = "corrupt-gzip"
	// HostileHugeBody is 100 MB of text with its Content-Length.
	HostileHugeBody = "huge-body"
	// HostileEndless is a chunked body that never ends: the server writes
	// until the client hangs up.
	HostileEndless = "endless-body"
	// HostileSlow trickles a 2 KB page a few bytes at a time for 20 s.
	HostileSlow = "slow-body"
	// HostileDeep is a page nested 100,000 elements deep.
	HostileDeep = "deep-nesting"
	// HostileCharsetMeta is a page whose meta charset declaration holds a
	// byte that is not UTF-8 before "charset" (once a parser panic).
	HostileCharsetMeta = "charset-meta-trick"
	// HostileCharsetUTF16 is ASCII HTML declared UTF-16 in the header.
	HostileCharsetUTF16 = "charset-utf16-lie"
	// HostileCharsetUnknown is a page in a charset nobody knows, with
	// bytes that are not UTF-8.
	HostileCharsetUnknown = "charset-unknown"
	// HostileControl is a page whose text, title and links hold control
	// characters, NULs, lone surrogates' encodings, invalid UTF-8 and
	// bidirectional overrides.
	HostileControl = "control-characters"
	// HostileBinary is 20 KB of random bytes served as text/html.
	HostileBinary = "binary-as-html"
	// HostileRedirectChain redirects through 30 hops, more than a crawler
	// follows.
	HostileRedirectChain = "redirect-chain"
	// HostileRedirectLoop redirects between two URLs forever.
	HostileRedirectLoop = "redirect-loop"
	// HostileMappedIP is a page linking to its own server as
	// [::ffff:127.0.0.1], 127.0.0.1 and other spellings of one address.
	HostileMappedIP = "ipv4-mapped-links"
	// HostileEmpty is a 200 answer with no body and no Content-Type.
	HostileEmpty = "empty"
)

// hostileKinds lists every kind in the order pages take them.
var hostileKinds = []string{
	HostileAmplifyBase, HostileAmplifyUnder, HostileLongLinks, HostileManyLinks, HostileManyImages,
	HostileLongMeta, HostileLongWord, HostileContentType, HostileHeaders, HostileHeadersOver,
	HostileGzip, HostileXGzip, HostileDeflate, HostileBrotli, HostileGzipBomb, HostileDeflateBomb,
	HostileBrotliBomb, HostileStackedCodings, HostileUnknownCoding, HostileBadGzip, HostileHugeBody,
	HostileEndless, HostileSlow, HostileDeep, HostileCharsetMeta, HostileCharsetUTF16,
	HostileCharsetUnknown, HostileControl, HostileBinary, HostileRedirectChain, HostileRedirectLoop,
	HostileMappedIP, HostileEmpty,
}

// HostileKinds returns the name of every hostile kind a web with
// HostileEvery set serves, in the order pages take them.
func HostileKinds() []string { return append([]string(nil), hostileKinds...) }

// Hostile returns the hostile kind of page on host, or "" for an ordinary
// page. With HostileEvery = k, page n of a host (its root excepted) is
// hostile when n is a multiple of k; the kinds follow each other from page
// to page and from host to host, so every kind appears once the web has as
// many hostile pages as kinds.
func (w *Web) Hostile(host, page int) string {
	k := w.cfg.HostileEvery
	if k <= 0 || page == 0 || page%k != 0 {
		return ""
	}
	perHost := (w.cfg.PagesPerHost - 1) / k
	return hostileKinds[(host*perHost+page/k-1)%len(hostileKinds)]
}

// HostilePages returns how many pages of each hostile kind the web serves.
func (w *Web) HostilePages() map[string]int {
	out := map[string]int{}
	if w.cfg.HostileEvery <= 0 {
		return out
	}
	for h := range w.cfg.Hosts {
		for p := w.cfg.HostileEvery; p < w.cfg.PagesPerHost; p += w.cfg.HostileEvery {
			out[w.Hostile(h, p)]++
		}
	}
	return out
}

// hostilePrefix is the path under which hostile pages keep what they link
// or redirect to; nothing under it is an ordinary page.
const hostilePrefix = "/x/"

// bombs holds the compression bombs, made once on first use: each is a few
// hundred KB that inflates to many MB.
type bombs struct {
	gzipOnce, deflateOnce, brOnce, stackedOnce sync.Once
	gzip, deflate, br, stacked                 []byte
}

// zeros compresses n MiB of zero bytes with enc.
func zeros(mib int, enc func(io.Writer) io.WriteCloser) []byte {
	var b bytes.Buffer
	zw := enc(&b)
	_, _ = io.WriteString(zw, "<html><title>bomb</title><body>")
	z := make([]byte, 1<<20)
	for range mib {
		_, _ = zw.Write(z)
	}
	_ = zw.Close()
	return b.Bytes()
}

func gzipBest(w io.Writer) io.WriteCloser {
	zw, _ := gzip.NewWriterLevel(w, gzip.BestCompression)
	return zw
}

// gzipBomb is 256 gzip members of 1 MiB of zeros each (a gzip reader reads
// the members as one stream): compressing 1 MiB once instead of 256 keeps
// it quick to make, under the race detector too.
func (b *bombs) gzipBomb() []byte {
	b.gzipOnce.Do(func() {
		first := zeros(1, gzipBest)
		var rest bytes.Buffer
		zw := gzipBest(&rest)
		_, _ = zw.Write(make([]byte, 1<<20))
		_ = zw.Close()
		out := bytes.NewBuffer(first)
		for range 255 {
			out.Write(rest.Bytes())
		}
		b.gzip = out.Bytes()
	})
	return b.gzip
}

func (b *bombs) deflateBomb() []byte {
	b.deflateOnce.Do(func() {
		b.deflate = zeros(64, func(w io.Writer) io.WriteCloser {
			zw, _ := zlib.NewWriterLevel(w, zlib.BestCompression)
			return zw
		})
	})
	return b.deflate
}

func (b *bombs) brotliBomb() []byte {
	b.brOnce.Do(func() {
		b.br = zeros(256, func(w io.Writer) io.WriteCloser { return brotli.NewWriterLevel(w, brotli.BestSpeed) })
	})
	return b.br
}

func (b *bombs) stackedBomb() []byte {
	b.stackedOnce.Do(func() {
		var buf bytes.Buffer
		zw := gzipBest(&buf)
		_, _ = zw.Write(b.gzipBomb())
		_ = zw.Close()
		b.stacked = buf.Bytes()
	})
	return b.stacked
}

// encode returns body in coding.
func encode(coding string, body []byte) []byte {
	var b bytes.Buffer
	var zw io.WriteCloser
	switch coding {
	case "deflate":
		zw = zlib.NewWriter(&b)
	case "br":
		zw = brotli.NewWriter(&b)
	default:
		zw = gzip.NewWriter(&b)
	}
	_, _ = zw.Write(body)
	_ = zw.Close()
	return b.Bytes()
}

// serveHostile answers the request for page on host, whose kind is kind.
func (w *Web) serveHostile(rw http.ResponseWriter, r *http.Request, host, page int, kind string) {
	h := rw.Header()
	ordinary := func() []byte {
		bp := w.pool.Get().(*[]byte)
		defer w.pool.Put(bp)
		*bp = w.render((*bp)[:0], host, page)
		return append([]byte(nil), *bp...)
	}
	html := func(body []byte) { w.write(rw, w.ctHTML, body) }
	encoded := func(coding string, body []byte) {
		h.Set("Content-Encoding", coding)
		html(body)
	}
	hostPart := "http://" + string(w.appendHost(nil, host)) + w.portSfx
	self := strconv.Itoa(host) + "-" + strconv.Itoa(page)
	switch kind {
	case HostileAmplifyBase, HostileAmplifyUnder:
		n := 8 << 10
		if kind == HostileAmplifyUnder {
			n = 1900
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, `<html><head><title>%s %s</title><base href="%sa/%s/%s/"></head><body>`,
			kind, self, hostilePrefix, self, strings.Repeat("p", n))
		for i := range 5000 {
			fmt.Fprintf(&b, `<a href=%c%d>x</a>`, 'a'+i%26, i)
		}
		b.WriteString("</body></html>")
		html(b.Bytes())
	case HostileLongLinks:
		var b bytes.Buffer
		fmt.Fprintf(&b, "<html><head><title>%s %s</title></head><body>", kind, self)
		long := strings.Repeat("l", 3<<10)
		for i := range 200 {
			fmt.Fprintf(&b, `<a href="%s%sl/%s/%d/%s">long</a>`, hostPart, hostilePrefix, self, i, long)
		}
		b.WriteString("</body></html>")
		html(b.Bytes())
	case HostileManyLinks:
		var b bytes.Buffer
		fmt.Fprintf(&b, "<html><head><title>%s %s</title></head><body>", kind, self)
		for i := range 5000 {
			r := mix(w.cfg.Seed, host, page, 1000+i)
			th := host
			if i%10 == 9 && w.cfg.Hosts > 1 {
				th = int(r>>32) % w.cfg.Hosts
			}
			b.WriteString(`<a href="`)
			if th != host {
				b.WriteString("http://")
				b.Write(w.appendHost(nil, th))
				b.WriteString(w.portSfx)
			}
			// Most targets repeat: the first pages of the host.
			b.Write(appendPagePath(nil, int(r%uint64(min(w.cfg.PagesPerHost, 8)))))
			b.WriteString(`">many</a> `)
		}
		b.WriteString("</body></html>")
		html(b.Bytes())
	case HostileManyImages:
		var b bytes.Buffer
		fmt.Fprintf(&b, "<html><head><title>%s %s</title></head><body>", kind, self)
		src, alt := strings.Repeat("i", 500), strings.Repeat("alt text ", 50)
		for i := range 3000 {
			fmt.Fprintf(&b, `<img src="/img/%d/%s.png" alt="%s%d">`, i, src, alt, i)
		}
		b.WriteString("</body></html>")
		html(b.Bytes())
	case HostileLongMeta:
		long := strings.Repeat("metadata ", 50<<10/9)
		var b bytes.Buffer
		fmt.Fprintf(&b, `<html><head><title>%s %s</title><meta name="description" content="%s"><meta name="keywords" content="%s"><meta name="author" content="%s"></head><body><h1>%s</h1>`,
			kind+" "+self, long, long, long, long, long)
		b.WriteString("</body></html>")
		html(b.Bytes())
	case HostileLongWord:
		html([]byte("<html><head><title>" + kind + " " + self + "</title></head><body><p>" + strings.Repeat("w", 200<<10) + "</p></body></html>"))
	case HostileContentType:
		w.write(rw, []string{"text/html; charset=utf-8; x=" + strings.Repeat("c", 40<<10)}, ordinary())
	case HostileHeaders, HostileHeadersOver:
		total := 60 << 10
		if kind == HostileHeadersOver {
			total = 80 << 10
		}
		v := strings.Repeat("v", 1000)
		for i := range total / 1024 {
			h.Set("X-Junk-"+strconv.Itoa(i), v)
		}
		html(ordinary())
	case HostileGzip, HostileXGzip, HostileDeflate, HostileBrotli:
		encoded(kind, encode(kind, ordinary()))
	case HostileGzipBomb:
		encoded("gzip", w.bombs.gzipBomb())
	case HostileDeflateBomb:
		encoded("deflate", w.bombs.deflateBomb())
	case HostileBrotliBomb:
		encoded("br", w.bombs.brotliBomb())
	case HostileStackedCodings:
		encoded("gzip, gzip", w.bombs.stackedBomb())
	case HostileUnknownCoding:
		encoded("compress", encode("gzip", ordinary()))
	case HostileBadGzip:
		encoded("gzip", ordinary())
	case HostileHugeBody:
		const size = 100 << 20
		h["Content-Type"] = w.ctHTML
		h.Set("Content-Length", strconv.Itoa(size))
		rw.WriteHeader(http.StatusOK)
		head := "<html><head><title>" + kind + " " + self + "</title></head><body><p>"
		_, _ = io.WriteString(rw, head)
		streamText(rw, w.corpus, size-len(head))
	case HostileEndless:
		h["Content-Type"] = w.ctHTML
		rw.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(rw, "<html><head><title>"+kind+" "+self+"</title></head><body><p>")
		streamText(rw, w.corpus, -1)
	case HostileSlow:
		h["Content-Type"] = w.ctHTML
		rw.WriteHeader(http.StatusOK)
		body := ordinary()
		body = body[:min(len(body), 2<<10)]
		step := max(1, len(body)/200) // 200 writes, 100 ms apart
		fl, _ := rw.(http.Flusher)
		for i := 0; i < len(body); i += step {
			if _, err := rw.Write(body[i:min(i+step, len(body))]); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
			t := time.NewTimer(100 * time.Millisecond)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
	case HostileDeep:
		var b bytes.Buffer
		fmt.Fprintf(&b, "<html><head><title>%s %s</title></head><body>", kind, self)
		b.WriteString(strings.Repeat("<div>", 100_000))
		b.WriteString("bottomword")
		b.WriteString(strings.Repeat("</div>", 100_000))
		b.WriteString("</body></html>")
		html(b.Bytes())
	case HostileCharsetMeta:
		html([]byte("<html><metA http-equiv=Content-tYpe Content=00000\xffChArset><title>" + kind + " " + self + "</title><body>words</body></html>"))
	case HostileCharsetUTF16:
		w.write(rw, []string{"text/html; charset=utf-16"}, ordinary())
	case HostileCharsetUnknown:
		body := append([]byte("<html><head><meta charset=\"x-no-such-charset\"><title>"+kind+" "+self+"</title></head><body><p>"), bytes.Repeat([]byte{0xe9, 0x80, 0xff, 'a', ' '}, 4000)...)
		w.write(rw, []string{"text/html; charset=x-no-such-charset"}, append(body, "</p></body></html>"...))
	case HostileControl:
		junk := "\x00\x01\x02\x07\x08\x0b\x0c\x0e\x1b\x1f\x7f\xc2\x80\xc2\x9f\xed\xa0\x80\xed\xbf\xbf\xef\xbf\xbe\xef\xbf\xbf\xe2\x80\xae\xe2\x80\x8b\xff\xfe"
		var b bytes.Buffer
		fmt.Fprintf(&b, "<html><head><title>%s %s %s</title><meta name=\"description\" content=\"%s\"></head><body>", kind, self, junk, junk)
		for i := range 50 {
			fmt.Fprintf(&b, "<p>%s %d %s</p>\n", junk, i, strings.Repeat("ctl\x00word ", 40))
			fmt.Fprintf(&b, "<a href=\"%sc/%s/%d/\x01\x7f\t\n%s\">link %s</a>\n", hostilePrefix, self, i, junk, junk)
		}
		b.WriteString("</body></html>")
		html(b.Bytes())
	case HostileBinary:
		body := make([]byte, 20<<10)
		for i := 0; i < len(body); i += 8 {
			x := mix(w.cfg.Seed, host, page, 5000+i)
			for j := range 8 {
				body[i+j] = byte(x >> (8 * j))
			}
		}
		html(body)
	case HostileRedirectChain:
		http.Redirect(rw, r, hostilePrefix+"r/"+self+"/1", http.StatusFound)
	case HostileRedirectLoop:
		http.Redirect(rw, r, hostilePrefix+"loop/"+self+"/a", http.StatusMovedPermanently)
	case HostileMappedIP:
		var b bytes.Buffer
		fmt.Fprintf(&b, "<html><head><title>%s %s</title></head><body>", kind, self)
		port := strings.TrimPrefix(w.portSfx, ":")
		for _, a := range []string{"[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "127.0.0.1", "2130706433", "0x7f.0.0.1", "127.1", "[0:0:0:0:0:ffff:127.0.0.1]"} {
			fmt.Fprintf(&b, `<a href="http://%s:%s/p/1.html">mapped</a> `, a, port)
		}
		b.WriteString("</body></html>")
		html(b.Bytes())
	case HostileEmpty:
		h.Set("Content-Length", "0")
		rw.WriteHeader(http.StatusOK)
	default:
		http.NotFound(rw, r)
	}
}

// serveHostileExtra answers the paths under hostilePrefix: the hops of
// redirect chains and loops. Everything else there (the targets of
// amplified, long and control-character links) is 404.
func (w *Web) serveHostileExtra(rw http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, hostilePrefix)
	switch {
	case strings.HasPrefix(rest, "r/"):
		// r/<self>/<hop>: 30 hops, then 404.
		i := strings.LastIndexByte(rest, '/')
		hop, err := strconv.Atoi(rest[i+1:])
		if err != nil || hop >= 30 {
			http.NotFound(rw, r)
			return
		}
		http.Redirect(rw, r, hostilePrefix+rest[:i+1]+strconv.Itoa(hop+1), http.StatusFound)
	case strings.HasPrefix(rest, "loop/"):
		next := "a"
		if strings.HasSuffix(rest, "/a") {
			next = "b"
		}
		i := strings.LastIndexByte(rest, '/')
		http.Redirect(rw, r, hostilePrefix+rest[:i+1]+next, http.StatusFound)
	default:
		http.NotFound(rw, r)
	}
}

// streamText writes text from corpus until n bytes are written (n < 0: until
// the client hangs up).
func streamText(wr io.Writer, corpus []byte, n int) {
	chunk := corpus[:min(len(corpus), 32<<10)]
	for n != 0 {
		c := chunk
		if n > 0 && n < len(c) {
			c = c[:n]
		}
		if _, err := wr.Write(c); err != nil {
			return
		}
		if n > 0 {
			n -= len(c)
		}
	}
}
