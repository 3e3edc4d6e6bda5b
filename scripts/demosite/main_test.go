package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// runDemo starts run with args, reads the first lines lines of its output,
// and returns them with a stop function that ends run and returns its exit
// code.
func runDemo(t *testing.T, args []string, lines int) ([]string, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, args, pw, io.Discard)
		pw.Close()
	}()
	var out []string
	sc := bufio.NewScanner(pr)
	for len(out) < lines && sc.Scan() {
		out = append(out, sc.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	var (
		once sync.Once
		rc   int
	)
	stop := func() int {
		once.Do(func() {
			cancel()
			rc = <-code
		})
		return rc
	}
	t.Cleanup(func() { stop() })
	return out, stop
}

// parseEnv reads KEY='VALUE' lines as a POSIX shell would for these values.
func parseEnv(t *testing.T, lines []string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, l := range lines {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" || strings.ContainsAny(k, " '\"") {
			t.Fatalf("line %q is not KEY=VALUE", l)
		}
		if strings.HasPrefix(v, "'") {
			if !strings.HasSuffix(v, "'") || len(v) < 2 || strings.Contains(v[1:len(v)-1], "'") {
				t.Fatalf("line %q is not simply quoted", l)
			}
			v = v[1 : len(v)-1]
		}
		env[k] = v
	}
	return env
}

// getVia fetches u, dialling the given port on 127.0.0.1 whatever its host.
func getVia(t *testing.T, port, u string) int {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
		},
	}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatalf("NewRequest(%q): %v", u, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %q: %v", u, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestPrintEnv(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		resolve   string
		startURLs int
	}{
		{"test site", []string{"-print-env"}, "*.example.test=127.0.0.1,other.test=127.0.0.1", 1},
		{"web", []string{"-print-env", "-web", "-hosts", "5", "-pages", "20"}, "*.sim.test=127.0.0.1", 5},
		{"web, fewer starts", []string{"-print-env", "-web", "-hosts", "5", "-starts", "2"}, "*.sim.test=127.0.0.1", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines, stop := runDemo(t, tt.args, 4)
			env := parseEnv(t, lines)
			if got := env["GRIDCRAWL_RESOLVE"]; got != tt.resolve {
				t.Errorf("GRIDCRAWL_RESOLVE = %q, want %q", got, tt.resolve)
			}
			urls := strings.Fields(env["GRIDCRAWL_DEMO_START_URLS"])
			if len(urls) != tt.startURLs || urls[0] != env["GRIDCRAWL_DEMO_START_URL"] {
				t.Errorf("start URLs = %q and %q, want %d URLs, the first repeated", urls, env["GRIDCRAWL_DEMO_START_URL"], tt.startURLs)
			}
			for _, u := range urls {
				if !strings.Contains(u, ":"+env["GRIDCRAWL_DEMO_PORT"]+"/") {
					t.Errorf("start URL %q lacks port %q", u, env["GRIDCRAWL_DEMO_PORT"])
				}
				if got := getVia(t, env["GRIDCRAWL_DEMO_PORT"], u); got != http.StatusOK {
					t.Errorf("GET %q = %d, want 200", u, got)
				}
			}
			if code := stop(); code != 0 {
				t.Errorf("run() = %d after cancel, want 0", code)
			}
		})
	}
}

func TestHumanOutput(t *testing.T) {
	lines, stop := runDemo(t, nil, 4)
	out := strings.Join(lines, "\n")
	for _, want := range []string{"serving on 127.0.0.1:", "start URL: http://www.example.test:", "GRIDCRAWL_RESOLVE="} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("run() = %d, want 0", code)
	}
}

func TestBadArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"unknown flag", []string{"-nope"}, 2},
		{"extra argument", []string{"extra"}, 2},
		{"port in use or invalid", []string{"-port", "-5"}, 1},
		{"help", []string{"-h"}, 0},
	}
	for _, tt := range tests {
		if got := run(t.Context(), tt.args, io.Discard, io.Discard); got != tt.want {
			t.Errorf("run(%q) = %d, want %d", tt.args, got, tt.want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "'plain'"},
		{"*.a=1,b=2", "'*.a=1,b=2'"},
		{"it's", `'it'\''s'`},
		{"", "''"},
	}
	for _, tt := range tests {
		if got := shellQuote(tt.in); got != tt.want {
			t.Errorf("shellQuote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
