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
		{"unreachable es list", Backends{ESURL: "http://elastic:es-s3cret@127.0.0.1:1,http://elastic:other-s3cret@127.0.0.1:2"}},
		{"unparsable es list", Backends{ESURL: "http://elastic:es-s3cret@127.0.0.1:1,http://elastic:other-s3cret@%zz"}},
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

// TestRedactLists: every password of a comma-separated list is redacted,
// also one with a comma that the split cuts.
func TestRedactLists(t *testing.T) {
	b := Backends{
		AMQPURL: "amqp://u:amqp-one@127.0.0.1:5701/, amqp://u:amqp-two@127.0.0.1:5702/,amqp://u:amqp-th%2Cree@127.0.0.1:5703/",
		ESURL:   "http://e:es-one@127.0.0.1:9211,http://e:es-two@127.0.0.1:9212",
	}
	msg := "amqp-one amqp-two amqp-th%2Cree amqp-th,ree es-one es-two"
	got := b.Redact(errors.New(msg)).Error()
	if want := "xxxxx xxxxx xxxxx xxxxx xxxxx xxxxx"; got != want {
		t.Errorf("Redact(%q) = %q, want %q", msg, got, want)
	}
}

// TestValidateLists checks the validation of endpoint lists and of the
// Elasticsearch settings.
func TestValidateLists(t *testing.T) {
	base := Backends{DataDir: "d", QueueMaxAttempts: 5, ESShards: 1}
	for _, tc := range []struct {
		name string
		set  func(*Backends)
		ok   bool
	}{
		{"es list", func(b *Backends) { b.ESURL = "http://127.0.0.1:9211,http://127.0.0.1:9212" }, true},
		{"es list of commas", func(b *Backends) { b.ESURL = " , ," }, false},
		{"amqp list of commas", func(b *Backends) { b.AMQPURL = "," }, false},
		{"s3 list of commas", func(b *Backends) {
			b.S3Endpoint, b.S3AccessKey, b.S3SecretKey, b.S3Bucket = ",", "a", "s", "b"
		}, false},
		{"replicas", func(b *Backends) { b.ESReplicas = "1" }, true},
		{"negative replicas", func(b *Backends) { b.ESReplicas = "-1" }, false},
		{"replicas not a number", func(b *Backends) { b.ESReplicas = "one" }, false},
		{"negative shards", func(b *Backends) { b.ESShards = -1 }, false},
		{"wait for all", func(b *Backends) { b.ESWaitForActiveShards = "all" }, true},
		{"wait for 2 of 2", func(b *Backends) { b.ESReplicas, b.ESWaitForActiveShards = "1", "2" }, true},
		{"wait for 2 of 1", func(b *Backends) { b.ESWaitForActiveShards = "2" }, false},
	} {
		b := base
		tc.set(&b)
		if err := b.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
