package websim

import (
	"bytes"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWebChange(t *testing.T) {
	w := NewWeb(WebConfig{Hosts: 2, PagesPerHost: 10, PageBytes: 24 << 10, Seed: 3})
	host := w.Host(1)
	before := map[string][]byte{}
	for _, p := range []string{"/", "/p/2.html", "/p/3.html"} {
		before[p] = serve(w, host, p).Body.Bytes()
	}
	w.Change(1, 3)
	w.Change(1, 3) // revision 2
	w.Change(5, 1) // no such host: ignored
	if got := w.Revision(1, 3); got != 2 {
		t.Fatalf("Revision(1, 3) = %d, want 2", got)
	}
	for _, p := range []string{"/", "/p/2.html"} {
		if after := serve(w, host, p).Body.Bytes(); !bytes.Equal(after, before[p]) {
			t.Errorf("unchanged page %s served another body after Change", p)
		}
	}
	after := serve(w, host, "/p/3.html").Body.Bytes()
	if bytes.Equal(after, before["/p/3.html"]) {
		t.Fatalf("changed page served the same body")
	}
	if !bytes.Contains(after, []byte(RevisionToken(1, 3, 2))) || bytes.Contains(before["/p/3.html"], []byte("zqxrev")) {
		t.Errorf("changed page lacks its revision token %s, or the original has one", RevisionToken(1, 3, 2))
	}
	if diff := cmp.Diff(pageLinks(t, before["/p/3.html"]), pageLinks(t, after)); diff != "" {
		t.Errorf("changed page's links differ (-before +after):\n%s", diff)
	}
	if n := len(after); n < 24<<10-512 || n > 24<<10+512 {
		t.Errorf("changed page has %d bytes, want about %d", n, 24<<10)
	}
	if diff := cmp.Diff(map[string]int{w.URL(1, 3): 2}, w.Changed()); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
	urls := w.ChangeEvery(4)
	want := []string{w.URL(0, 3), w.URL(0, 7), w.URL(1, 3), w.URL(1, 7)}
	if !slices.Equal(urls, want) {
		t.Errorf("ChangeEvery(4) = %v, want %v", urls, want)
	}
	if got := w.Changed(); len(got) != 4 || got[w.URL(1, 3)] != 3 || got[w.URL(0, 7)] != 1 {
		t.Errorf("Changed after ChangeEvery = %v", got)
	}
}
