package contracts_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
)

func TestWithScheme(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"ip and port", "127.0.0.1:8701", "http://127.0.0.1:8701"},
		{"private ip and path", "192.168.1.5/a", "http://192.168.1.5/a"},
		{"ipv6 literal", "[::1]:8080/", "http://[::1]:8080/"},
		{"localhost with spaces around", " localhost:8080/ ", "http://localhost:8080/"},
		{"host with path and query", "example.com/a?b", "https://example.com/a?b"},
		{"host alone", "yacy.net", "https://yacy.net"},
		{"host and port", "example.com:8080/a", "https://example.com:8080/a"},
		{"https kept", "https://example.com/", "https://example.com/"},
		{"other scheme kept", "ftp://example.com/", "ftp://example.com/"},
		{"mailto kept", "mailto:x@a.test", "mailto:x@a.test"},
		{"space inside is no host", "foo bar", "foo bar"},
		{"empty", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := contracts.WithScheme(tc.in); got != tc.want {
				t.Errorf("WithScheme(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestStartURLCompletion checks that WithDefaults completes start URLs
// without a scheme, that Validate takes them, and that what is no host at
// all gets an error naming the field and saying what is wrong.
func TestStartURLCompletion(t *testing.T) {
	tests := []struct {
		name      string
		in        []string
		want      []string // after WithDefaults
		wantField string   // "" for valid
		wantError string
	}{
		{"host and path", []string{"example.org/path"}, []string{"https://example.org/path"}, "", ""},
		{"local address", []string{"127.0.0.1:8000/", "https://a.test/"}, []string{"http://127.0.0.1:8000/", "https://a.test/"}, "", ""},
		{"words", []string{"https://a.test/", "foo bar"}, []string{"https://a.test/", "foo bar"}, "start_urls[1]", `"foo bar" is not a URL`},
		{"bad host", []string{"exa%zzmple"}, []string{"https://exa%zzmple"}, "start_urls[0]", `"https://exa%zzmple" is not a URL`},
		{"empty", []string{""}, []string{""}, "start_urls[0]", "is empty"},
		{"path only", []string{"/a"}, []string{"https:///a"}, "start_urls[0]", "host is missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]string(nil), tc.in...)
			p := contracts.Profile{StartURLs: in}.WithDefaults()
			if diff := cmp.Diff(tc.want, p.StartURLs); diff != "" {
				t.Errorf("WithDefaults(%q).StartURLs (-want +got):\n%s", tc.in, diff)
			}
			if !cmp.Equal(in, tc.in) {
				t.Errorf("WithDefaults changed its argument's start URLs to %q", in)
			}
			err := p.Validate()
			var fe *contracts.FieldError
			switch {
			case tc.wantField == "" && err != nil:
				t.Errorf("Validate(%q) = %v, want nil", p.StartURLs, err)
			case tc.wantField == "":
			case !errors.As(err, &fe):
				t.Errorf("Validate(%q) = %v, want a *FieldError for %s", p.StartURLs, err, tc.wantField)
			case fe.Field != tc.wantField || !strings.Contains(fe.Reason, tc.wantError):
				t.Errorf("Validate(%q) = %q on %q, want %q on %q", p.StartURLs, fe.Reason, fe.Field, tc.wantError, tc.wantField)
			}
		})
	}
}

// TestStartURLWithoutScheme checks the message of Validate for a start URL
// that did not go through WithDefaults.
func TestStartURLWithoutScheme(t *testing.T) {
	p := contracts.Profile{StartURLs: []string{"https://a.test/"}}.WithDefaults()
	p.StartURLs = []string{"example.org"}
	err := p.Validate()
	want := `invalid start_urls[0]: "example.org" has no scheme: write http://example.org or https://example.org`
	if err == nil || err.Error() != want {
		t.Errorf("Validate(%q) = %v, want %s", p.StartURLs, err, want)
	}
}
