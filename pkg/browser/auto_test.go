package browser

import (
	"strings"
	"testing"
)

func TestNeedsRender(t *testing.T) {
	long := "<p>" + strings.Repeat("A static paragraph with real words. ", 20) + "</p>"
	tests := []struct {
		name, page, want string
	}{
		{"static page", "<html><head><title>t</title></head><body>" + long + "<a href=/x>x</a></body></html>", ""},
		{"static page with scripts", "<html><head><script src=/a.js></script></head><body>" + long + "</body></html>", ""},
		{"short page without scripts", "<html><body><p>Hello</p></body></html>", ""},
		{"shell", `<html><head><script src=/app.js></script></head><body><p>Loading</p></body></html>`, "auto: scripts and 7 characters of text"},
		{"noscript", `<html><body>` + long + `<noscript>You need to enable JavaScript to run this app.</noscript></body></html>`, "auto: <noscript> asks for JavaScript"},
		{"noscript without the ask", `<html><body>` + long + `<noscript><img src=/pixel.gif></noscript></body></html>`, ""},
		{"react root", `<html><body>` + long + `<div id="root"></div><script src=/main.js></script></body></html>`, "auto: empty app root #root"},
		{"filled root", `<html><body><div id="root">` + long + `</div><script src=/main.js></script></body></html>`, ""},
		{"angular", `<html><body>` + long + `<app-root></app-root><script src=/main.js></script></body></html>`, "auto: empty app root app-root"},
		{"text in script does not count", `<html><body><script>var s = "` + strings.Repeat("x", 500) + `";</script></body></html>`, "auto: scripts and 0 characters of text"},
	}
	for _, tt := range tests {
		if got := NeedsRender([]byte(tt.page)); got != tt.want {
			t.Errorf("%s: NeedsRender = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func FuzzNeedsRender(f *testing.F) {
	f.Add([]byte(`<div id="root"><script>`))
	f.Fuzz(func(t *testing.T, b []byte) { NeedsRender(b) })
}
