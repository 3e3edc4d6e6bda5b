package websim

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/andybalholm/brotli"
)

// TestHostileWebServesEveryKind fetches one page of every hostile kind and
// checks it is the hostile answer its name promises, and that the other
// pages of the web are ordinary.
func TestHostileWebServesEveryKind(t *testing.T) {
	w := startWeb(t, WebConfig{Hosts: 4, PagesPerHost: 100, HostileEvery: 10, Seed: 3})
	counts := w.HostilePages()
	for _, k := range HostileKinds() {
		if counts[k] == 0 {
			t.Errorf("HostilePages()[%q] = 0, want every kind served", k)
		}
	}
	where := map[string][2]int{}
	for h := range 4 {
		for p := range 100 {
			k := w.Hostile(h, p)
			if (k != "") != (p > 0 && p%10 == 0) {
				t.Errorf("Hostile(%d, %d) = %q, want a kind exactly on non-root multiples of 10", h, p, k)
			}
			if _, seen := where[k]; k != "" && !seen {
				where[k] = [2]int{h, p}
			}
		}
	}
	// max is how much of each body is read: enough to tell, less than the
	// endless and huge bodies.
	const max = 4 << 20
	ctIs := func(want string) func(*http.Response, []byte) string {
		return func(r *http.Response, _ []byte) string {
			if got := r.Header.Get("Content-Type"); got != want {
				return "Content-Type " + trunc(got)
			}
			return ""
		}
	}
	inflatesPast := func(limit int, dec func(io.Reader) (io.Reader, error)) func(*http.Response, []byte) string {
		return func(_ *http.Response, body []byte) string {
			if len(body) > 1<<20 {
				return "bomb of " + itoa(len(body)) + " bytes, want under 1 MiB"
			}
			r, err := dec(bytes.NewReader(body))
			if err != nil {
				return err.Error()
			}
			n, _ := io.Copy(io.Discard, io.LimitReader(r, int64(limit)+1))
			if n <= int64(limit) {
				return "inflates to " + itoa(int(n)) + " bytes"
			}
			return ""
		}
	}
	gunzip := func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }
	checks := map[string]func(*http.Response, []byte) string{
		HostileAmplifyBase: func(_ *http.Response, b []byte) string {
			if !bytes.Contains(b, []byte(`<base href="/x/a/`)) || bytes.Count(b, []byte("<a ")) != 5000 {
				return "no base or not 5,000 links"
			}
			return ""
		},
		HostileAmplifyUnder: func(_ *http.Response, b []byte) string {
			if bytes.Count(b, []byte("<a ")) != 5000 {
				return "not 5,000 links"
			}
			return ""
		},
		HostileLongLinks: func(_ *http.Response, b []byte) string {
			if bytes.Count(b, []byte("<a ")) != 200 || len(b) < 200*3<<10 {
				return "not 200 long links"
			}
			return ""
		},
		HostileManyLinks: func(_ *http.Response, b []byte) string {
			if bytes.Count(b, []byte("<a ")) != 5000 {
				return "not 5,000 links"
			}
			return ""
		},
		HostileManyImages: func(_ *http.Response, b []byte) string {
			if bytes.Count(b, []byte("<img ")) != 3000 {
				return "not 3,000 images"
			}
			return ""
		},
		HostileLongMeta: func(_ *http.Response, b []byte) string {
			if len(b) < 200<<10 {
				return "metadata under 200 KB"
			}
			return ""
		},
		HostileLongWord: func(_ *http.Response, b []byte) string {
			if !bytes.Contains(b, bytes.Repeat([]byte("w"), 200<<10)) {
				return "no 200 KB word"
			}
			return ""
		},
		HostileContentType: func(r *http.Response, _ []byte) string {
			if n := len(r.Header.Get("Content-Type")); n < 40<<10 {
				return "Content-Type of " + itoa(n) + " bytes"
			}
			return ""
		},
		HostileHeaders:     headerBytes(55<<10, 64<<10),
		HostileGzip:        decodesTo(gunzip),
		HostileXGzip:       decodesTo(gunzip),
		HostileDeflate:     decodesTo(func(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }),
		HostileBrotli:      decodesTo(func(r io.Reader) (io.Reader, error) { return brotli.NewReader(r), nil }),
		HostileGzipBomb:    inflatesPast(64<<20, gunzip),
		HostileDeflateBomb: inflatesPast(32<<20, func(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }),
		HostileBrotliBomb:  inflatesPast(64<<20, func(r io.Reader) (io.Reader, error) { return brotli.NewReader(r), nil }),
		HostileStackedCodings: func(r *http.Response, b []byte) string {
			if r.Header.Get("Content-Encoding") != "gzip, gzip" {
				return "Content-Encoding " + r.Header.Get("Content-Encoding")
			}
			return inflatesPast(64<<20, func(r io.Reader) (io.Reader, error) {
				zr, err := gzip.NewReader(r)
				if err != nil {
					return nil, err
				}
				return gzip.NewReader(zr)
			})(r, b)
		},
		HostileUnknownCoding: func(r *http.Response, _ []byte) string {
			if r.Header.Get("Content-Encoding") != "compress" {
				return "Content-Encoding " + r.Header.Get("Content-Encoding")
			}
			return ""
		},
		HostileBadGzip: func(r *http.Response, b []byte) string {
			if r.Header.Get("Content-Encoding") != "gzip" || !bytes.HasPrefix(b, []byte("<!DOCTYPE")) {
				return "not plain HTML declared gzip"
			}
			return ""
		},
		HostileHugeBody: func(r *http.Response, b []byte) string {
			if r.ContentLength != 100<<20 || len(b) != max {
				return "Content-Length " + itoa(int(r.ContentLength))
			}
			return ""
		},
		HostileEndless: func(r *http.Response, b []byte) string {
			if r.ContentLength != -1 || len(b) != max {
				return "a body that ends"
			}
			return ""
		},
		HostileDeep: func(_ *http.Response, b []byte) string {
			if bytes.Count(b, []byte("<div>")) != 100_000 {
				return "not 100,000 levels"
			}
			return ""
		},
		HostileCharsetMeta:    func(_ *http.Response, b []byte) string { return absent(b, "\xffChArset") },
		HostileCharsetUTF16:   ctIs("text/html; charset=utf-16"),
		HostileCharsetUnknown: ctIs("text/html; charset=x-no-such-charset"),
		HostileControl:        func(_ *http.Response, b []byte) string { return absent(b, "\x00\x01") },
		HostileBinary: func(_ *http.Response, b []byte) string {
			if len(b) != 20<<10 || bytes.Contains(b, []byte("<html")) {
				return "not 20 KB of binary"
			}
			return ""
		},
		HostileMappedIP: func(_ *http.Response, b []byte) string { return absent(b, "[::ffff:127.0.0.1]") },
		HostileEmpty: func(r *http.Response, b []byte) string {
			if len(b) != 0 || r.Header.Get("Content-Type") != "" {
				return "a body or a Content-Type"
			}
			return ""
		},
	}
	c := w.Client()
	for _, kind := range HostileKinds() {
		t.Run(kind, func(t *testing.T) {
			hp := where[kind]
			u := w.URL(hp[0], hp[1])
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept-Encoding", "gzip, deflate, br") // no transparent decoding
			switch kind {
			case HostileHeadersOver:
				// The client's default 1 MiB header limit reads it; the
				// loader's 64 KiB does not.
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if msg := headerBytes(64<<10, 1<<20)(resp, nil); msg != "" {
					t.Errorf("GET %s: %s", u, msg)
				}
				return
			case HostileSlow:
				return // 20 s; its handler is the ordinary page, trickled
			case HostileRedirectChain, HostileRedirectLoop:
				hops := 0
				for next := u; hops < 40; hops++ {
					resp := mustGet(t, c, next)
					resp.Body.Close()
					if resp.StatusCode/100 != 3 {
						break
					}
					loc, err := resp.Location()
					if err != nil {
						t.Fatal(err)
					}
					next = loc.String()
				}
				if want := map[string]int{HostileRedirectChain: 30, HostileRedirectLoop: 40}[kind]; hops != want {
					t.Errorf("GET %s: %d redirects, want %d", u, hops, want)
				}
				return
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, max))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s = %d, want 200", u, resp.StatusCode)
			}
			if msg := checks[kind](resp, body); msg != "" {
				t.Errorf("GET %s (%s): %s", u, kind, msg)
			}
		})
	}
	// Ordinary pages of the hostile web are the ordinary web's.
	plain := startWeb(t, WebConfig{Hosts: 4, PagesPerHost: 100, Seed: 3})
	for _, hp := range [][2]int{{0, 0}, {1, 11}, {3, 99}} {
		_, a := webGet(t, c, w.URL(hp[0], hp[1]))
		_, b := webGet(t, plain.Client(), plain.URL(hp[0], hp[1]))
		a = bytes.ReplaceAll(a, []byte(w.portSfx), nil)
		b = bytes.ReplaceAll(b, []byte(plain.portSfx), nil)
		if !bytes.Equal(a, b) {
			t.Errorf("page %v differs from the ordinary web's", hp)
		}
	}
}

func mustGet(t *testing.T, c *http.Client, u string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp
}

// headerBytes checks the response's headers take between lo and hi bytes.
func headerBytes(lo, hi int) func(*http.Response, []byte) string {
	return func(r *http.Response, _ []byte) string {
		var b bytes.Buffer
		_ = r.Header.Write(&b)
		if b.Len() < lo || b.Len() > hi {
			return "headers of " + itoa(b.Len()) + " bytes, want " + itoa(lo) + " to " + itoa(hi)
		}
		return ""
	}
}

// decodesTo checks the body decodes to an ordinary page.
func decodesTo(dec func(io.Reader) (io.Reader, error)) func(*http.Response, []byte) string {
	return func(_ *http.Response, body []byte) string {
		r, err := dec(bytes.NewReader(body))
		if err != nil {
			return err.Error()
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return err.Error()
		}
		if !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) || len(b) < 4000 {
			return "decodes to " + trunc(string(b))
		}
		return ""
	}
}

func absent(b []byte, want string) string {
	if !bytes.Contains(b, []byte(want)) {
		return "no " + want
	}
	return ""
}

func trunc(s string) string { return s[:min(len(s), 60)] }

func itoa(n int) string { return strconv.Itoa(n) }
