package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

func TestHostGaps(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	req := func(host string, from, to int) websim.Request {
		return websim.Request{Host: host, Path: "/", Start: ms(from), End: ms(to)}
	}
	log := []websim.Request{
		// a: gaps 500 and 600 ms, logged out of order (the log is in finishing order)
		req("a", 1120, 1130), req("a", 0, 10), req("a", 510, 520),
		// b: the third request starts 300 ms after the second ends
		req("b", 0, 100), req("b", 700, 750), req("b", 1050, 1060),
		// c: overlapping requests
		req("c", 0, 100), req("c", 50, 60),
		// d: one request, no gap
		req("d", 0, 10),
	}
	gaps, at := hostGaps(log)
	want := map[string]time.Duration{"a": 500 * time.Millisecond, "b": 300 * time.Millisecond, "c": -50 * time.Millisecond}
	if len(gaps) != len(want) {
		t.Fatalf("hostGaps = %v, want %v", gaps, want)
	}
	for h, g := range want {
		if gaps[h] != g {
			t.Errorf("gap of %s = %s, want %s", h, gaps[h], g)
		}
	}
	if !at["b"].Equal(ms(1050)) {
		t.Errorf("b's shortest gap ends at %s, want 1050 ms in", at["b"])
	}
	p := checkPoliteness(gaps, at, 500*time.Millisecond)
	if p.hosts != 3 || p.min != -50*time.Millisecond || p.minHost != "c" || len(p.short) != 2 ||
		!strings.HasPrefix(p.short[0], "b ") || !strings.HasPrefix(p.short[1], "c ") {
		t.Errorf("checkPoliteness = %+v, want 3 hosts, c shortest at -50ms, b and c short", p)
	}
	if p := checkPoliteness(gaps, at, 300*time.Millisecond); len(p.short) != 1 {
		t.Errorf("with a 300 ms delay, short hosts = %v, want c only", p.short)
	}
}

func TestRateDip(t *testing.T) {
	flat := func(n, v int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = v
		}
		return s
	}
	// 100 pages/s for a minute, nothing for 20 s after a kill, then 100 again.
	series := append(append(flat(60, 100), flat(20, 0)...), flat(60, 100)...)
	d := rateDip(series, 60)
	if d.baseline != 100 || d.lowest != 0 || d.recovered < 12 || d.recovered > 20 {
		t.Errorf("dip = %+v, want baseline 100, lowest 0, recovered within 12-20 s (the 10 s mean reaches 80%% 2 s before the rate does)", d)
	}
	if d := rateDip(flat(120, 50), 60); d.recovered != 0 || d.lowest != 50 {
		t.Errorf("no dip: %+v, want recovered at once", d)
	}
	// Never back: the crawl ends at a tenth of the rate.
	if d := rateDip(append(flat(60, 100), flat(60, 10)...), 60); d.recovered != -1 {
		t.Errorf("no recovery: %+v, want recovered -1", d)
	}
	if got := perSecond([]websim.Request{
		{Path: "/robots.txt", Start: time.Unix(100, 0)},
		{Path: "/", Start: time.Unix(100, 5e8)},
		{Path: "/p/1.html", Start: time.Unix(102, 0)},
	}, time.Unix(100, 0)); len(got) != 3 || got[0] != 1 || got[1] != 0 || got[2] != 1 {
		t.Errorf("perSecond = %v, want [1 0 1]", got)
	}
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	if _, err := gz.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestParseRecord(t *testing.T) {
	record := func(typ, uri string, length int) string {
		return "WARC/1.1\r\nWARC-Type: " + typ + "\r\nWARC-Target-URI: " + uri + "\r\nContent-Length: " +
			strconv.Itoa(length) + "\r\n\r\nHTTP/1.1 200 OK\r\n\r\nhello\r\n\r\n"
	}
	const url = "http://h0001.sim.test:8080/p/3.html"
	ok := gzipped(t, record("response", url, 24))
	if err := parseRecord(ok, true, url); err != nil {
		t.Errorf("a good response record: %v", err)
	}
	if err := parseRecord([]byte(record("revisit", url, 24)), false, url); err != nil {
		t.Errorf("an uncompressed revisit record: %v", err)
	}
	for name, tc := range map[string]struct {
		b       []byte
		gzipped bool
		want    string
	}{
		"other URL":       {ok, true, "a record of"},
		"request":         {gzipped(t, record("request", url, 24)), true, `"request" record`},
		"two members":     {append(append([]byte(nil), ok...), ok...), true, "bytes after"},
		"cut member":      {ok[:len(ok)-5], true, "gzip member"},
		"not gzip":        {[]byte("hello"), true, "not a gzip member"},
		"not WARC":        {gzipped(t, "HTTP/1.1 200 OK\r\n\r\n"), true, "no WARC record"},
		"short block":     {gzipped(t, record("response", url, 500)), true, "Content-Length says 500"},
		"offset too late": {ok[3:], true, "not a gzip member"},
	} {
		u := url
		if name == "other URL" {
			u = "http://h0001.sim.test:8080/p/4.html"
		}
		err := parseRecord(tc.b, tc.gzipped, u)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.want)
		}
	}
}

func TestWalkSegment(t *testing.T) {
	rec := func(uri string) string {
		return "WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: " + uri + "\r\nContent-Length: 5\r\n\r\nhello\r\n\r\n"
	}
	var whole []byte
	for i := range 3 {
		whole = append(whole, gzipped(t, rec("http://x/"+strconv.Itoa(i)))...)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if n, err := walkSegment(write("whole.warc.gz", whole)); n != 3 || err != nil {
		t.Errorf("a whole segment: %d records, %v; want 3, nil", n, err)
	}
	if n, err := walkSegment(write("plain.warc", []byte(rec("http://x/")+rec("http://y/")))); n != 2 || err != nil {
		t.Errorf("an uncompressed segment: %d records, %v; want 2, nil", n, err)
	}
	for name, b := range map[string][]byte{
		"cut.warc.gz":     whole[:len(whole)-10], // what warcio check lets pass
		"garbage.warc.gz": append(append([]byte(nil), whole...), "junk"...),
		"two.warc.gz":     gzipped(t, rec("http://x/")+rec("http://y/")), // two records in one member
		"noend.warc.gz":   gzipped(t, strings.TrimSuffix(rec("http://x/"), "\r\n\r\n")),
	} {
		if n, err := walkSegment(write(name, b)); err == nil {
			t.Errorf("%s: %d records, no error", name, n)
		}
	}
}

func TestWithVhost(t *testing.T) {
	got, err := withVhost("amqp://guest:guest@127.0.0.1:5701/,amqp://guest:guest@127.0.0.1:5702", "gridsoak-1")
	want := "amqp://guest:guest@127.0.0.1:5701/gridsoak-1,amqp://guest:guest@127.0.0.1:5702/gridsoak-1"
	if err != nil || got != want {
		t.Errorf("withVhost = %q, %v, want %q", got, err, want)
	}
	if _, err := withVhost("http://127.0.0.1:9200", "x"); err == nil {
		t.Error("withVhost took an http URL")
	}
}

func TestKillFlags(t *testing.T) {
	for in, want := range map[string]string{"rabbitmq": "rabbitmq", "rabbit3": "rabbitmq", "es1": "elasticsearch",
		"elasticsearch": "elasticsearch", "minio4": "minio", "minio5": "", "es": "", "rabbit": "", "postgres": ""} {
		if got := nodeCluster(in); got != want {
			t.Errorf("nodeCluster(%q) = %q, want %q", in, got, want)
		}
	}
	if fs, err := fractions("0.15, 0.45,0.75"); err != nil || len(fs) != 3 || fs[1] != 0.45 {
		t.Errorf("fractions = %v, %v", fs, err)
	}
	for _, bad := range []string{"0.5,0.4", "1.5", "0", "x"} {
		if _, err := fractions(bad); err == nil {
			t.Errorf("fractions(%q) took it", bad)
		}
	}
}

func TestCtlCommands(t *testing.T) {
	one := []string{"scripts/services/rabbitmq.sh", "ctl", "rabbitmqctl"}
	if got := ctlCommands(one); len(got) != 1 || strings.Join(got[0], " ") != strings.Join(one, " ") {
		t.Errorf("ctlCommands(%v) = %v", one, got)
	}
	got := ctlCommands([]string{"env", "HOME=/x", "rabbitmqctl", "-n", "a@localhost,b@localhost", "--longnames"})
	if len(got) != 2 || strings.Join(got[0], " ") != "env HOME=/x rabbitmqctl -n a@localhost --longnames" ||
		strings.Join(got[1], " ") != "env HOME=/x rabbitmqctl -n b@localhost --longnames" {
		t.Errorf("ctlCommands with two nodes = %q", got)
	}
}
