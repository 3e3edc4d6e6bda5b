package wire

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRedact(t *testing.T) {
	b := Backends{
		AMQPURL:     "amqp://user:pa%24%24word@host:5672/",
		ESURL:       "http://elastic:es-s3cret@%zz",
		S3Endpoint:  "127.0.0.1:9000",
		S3SecretKey: "minio-s3cret",
	}
	base := errors.New("boom")
	tests := []struct {
		name, in, want string
	}{
		{"amqp as written", `dial "amqp://user:pa%24%24word@host:5672/"`, `dial "amqp://user:xxxxx@host:5672/"`},
		{"amqp decoded", `auth failed for user with pa$$word`, `auth failed for user with xxxxx`},
		{"es in a parse error", `parse "http://elastic:es-s3cret@%zz": invalid URL escape "%zz"`, `parse "http://elastic:xxxxx@%zz": invalid URL escape "%zz"`},
		{"s3 key", `signature with minio-s3cret`, `signature with xxxxx`},
		{"nothing secret", `connection refused`, `connection refused`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := b.Redact(errors.Join(errors.New(tt.in), base))
			if got := strings.SplitN(err.Error(), "\n", 2)[0]; got != tt.want {
				t.Errorf("Redact = %q, want %q", got, tt.want)
			}
			if !errors.Is(err, base) {
				t.Error("Redact lost the wrapped error")
			}
		})
	}
	if b.Redact(nil) != nil {
		t.Error("Redact(nil) != nil")
	}
}

// TestOpenErrorsHoldNoCredentials opens backends whose URLs carry passwords
// and cannot work (an unparsable URL, a closed port): the errors must name
// the backend without the password.
func TestOpenErrorsHoldNoCredentials(t *testing.T) {
	tests := []struct {
		name string
		b    Backends
	}{
		{"unparsable amqp url", Backends{AMQPURL: "amqp://user:amqp-s3cret@%zz/"}},
		{"unparsable es url", Backends{ESURL: "http://elastic:es-s3cret@%zz"}},
		{"unreachable es", Backends{ESURL: "http://elastic:es-s3cret@127.0.0.1:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.b.DataDir = filepath.Join(t.TempDir(), "data")
			tt.b.QueueMaxAttempts = 5
			tt.b.ESPrefix = "gridcrawl"
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := Open(ctx, tt.b, slog.New(slog.DiscardHandler))
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded, want an error")
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}
