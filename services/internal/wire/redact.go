package wire

import (
	"net/url"
	"strings"
)

// secrets returns the credentials in b: the passwords of the broker and
// Elasticsearch URLs, of each URL of a comma-separated list (as written
// and percent-decoded), and the S3 secret key.
func (b *Backends) secrets() []string {
	var out []string
	var urls []string
	for _, list := range []string{b.AMQPURL, b.ESURL, b.S3Endpoint} {
		// The list whole too: a password with a comma in it is cut by
		// the split.
		urls = append(urls, list)
		if strings.Contains(list, ",") {
			urls = append(urls, strings.Split(list, ",")...)
		}
	}
	for _, u := range urls {
		if p := urlPassword(strings.TrimSpace(u)); p != "" {
			out = append(out, p)
			if d, err := url.PathUnescape(p); err == nil && d != p {
				out = append(out, d)
			}
		}
	}
	if b.S3SecretKey != "" {
		out = append(out, b.S3SecretKey)
	}
	return out
}

// urlPassword returns the password in the userinfo of raw, found without
// parsing raw, which may be invalid: libraries quote an URL they cannot parse
// in their errors.
func urlPassword(raw string) string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return ""
	}
	_, pass, _ := strings.Cut(rest[:at], ":")
	return pass
}

// Redact returns err with every credential of b in its text replaced by
// "xxxxx" (nil for nil). The result unwraps to err, so errors.Is and
// errors.As still see what it wraps.
func (b *Backends) Redact(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := msg
	for _, s := range b.secrets() {
		clean = strings.ReplaceAll(clean, s, "xxxxx")
	}
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
