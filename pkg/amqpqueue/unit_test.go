package amqpqueue

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp "github.com/rabbitmq/amqp091-go"
)

// The tests in this file need no broker.

func TestBucketFor(t *testing.T) {
	tests := []struct {
		delay    time.Duration
		want     string
		wantFits bool
	}{
		{time.Nanosecond, "100ms", true},
		{10 * time.Millisecond, "100ms", true},
		{100 * time.Millisecond, "100ms", true},
		{100*time.Millisecond + 1, "500ms", true},
		{400 * time.Millisecond, "500ms", true},
		{time.Second, "1s", true},
		{3 * time.Second, "5s", true},
		{59 * time.Second, "1m", true},
		{time.Hour, "1h", true},
		{4 * time.Hour, "4h", true},
		{4*time.Hour + 1, "4h", false},
		{72 * time.Hour, "4h", false},
	}
	for _, tt := range tests {
		b, fits := bucketFor(tt.delay)
		if b.name != tt.want || fits != tt.wantFits {
			t.Errorf("bucketFor(%v) = %q, %v, want %q, %v", tt.delay, b.name, fits, tt.want, tt.wantFits)
		}
		if fits && b.d < tt.delay {
			t.Errorf("bucketFor(%v) = %v, shorter than the delay", tt.delay, b.d)
		}
	}
}

func TestBucketsAscend(t *testing.T) {
	for i := 1; i < len(buckets); i++ {
		if buckets[i].d <= buckets[i-1].d {
			t.Errorf("bucket %q (%v) not longer than %q (%v)", buckets[i].name, buckets[i].d, buckets[i-1].name, buckets[i-1].d)
		}
		if len(buckets[i].name) > len("500ms") {
			t.Errorf("bucket name %q longer than the suffix budget allows", buckets[i].name)
		}
	}
}

func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"simple", "crawl.contracts", true},
		{"empty", "", false},
		{"not utf-8", "a\xffb", false},
		{"longest allowed", strings.Repeat("a", maxNameLen-longestSuffix), true},
		{"too long for its wait queues", strings.Repeat("a", maxNameLen-longestSuffix+1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := checkName(tt.in); (err == nil) != tt.ok {
				t.Errorf("checkName(%q) = %v, want ok %v", tt.in, err, tt.ok)
			}
		})
	}
	// Every satellite of the longest allowed name fits.
	long := strings.Repeat("a", maxNameLen-longestSuffix)
	for _, n := range waitQueueNames(long + ".dead") {
		if len(n) > maxNameLen {
			t.Errorf("wait queue name of %d bytes, want <= %d", len(n), maxNameLen)
		}
	}
}

func TestPublishHeaders(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]string
		want    amqp.Table
		wantErr bool
	}{
		{"nil", nil, nil, false},
		{"empty", map[string]string{}, nil, false},
		{"plain", map[string]string{"a": "1", "x-gridcrawl-reason": "r"}, amqp.Table{"a": "1", "x-gridcrawl-reason": "r"}, false},
		{"attempt reserved", map[string]string{HeaderAttempt: "2"}, nil, true},
		{"due reserved", map[string]string{HeaderDue: "2"}, nil, true},
		{"broker count reserved", map[string]string{"x-delivery-count": "2"}, nil, true},
		{"broker death reserved", map[string]string{"x-last-death-queue": "q"}, nil, true},
		{"empty name", map[string]string{"": "v"}, nil, true},
		{"long name", map[string]string{strings.Repeat("k", 256): "v"}, nil, true},
		{"not utf-8 name", map[string]string{"\xff": "v"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := publishHeaders(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("publishHeaders(%v) = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("publishHeaders(%v) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestStringHeaders(t *testing.T) {
	in := amqp.Table{
		"s":                "v",
		"b":                []byte("bytes"),
		"i":                int32(7),
		"l":                int64(-8),
		"f":                true,
		"t":                time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC),
		"nested":           amqp.Table{"a": "b"},
		"list":             []any{"a"},
		HeaderAttempt:      int64(3),
		"x-delivery-count": int64(1),
		"x-death":          []any{amqp.Table{"count": int64(1)}},
		"x-first-death-q":  "q",
	}
	want := map[string]string{"s": "v", "b": "bytes", "i": "7", "l": "-8", "f": "true", "t": "2024-05-06T07:08:09Z"}
	if diff := cmp.Diff(want, stringHeaders(userTable(in))); diff != "" {
		t.Errorf("stringHeaders(userTable()) (-want +got):\n%s", diff)
	}
}

func TestIntHeader(t *testing.T) {
	tests := []struct {
		v      any
		want   int64
		wantOK bool
	}{
		{int64(5), 5, true},
		{int32(5), 5, true},
		{int16(-5), -5, true},
		{uint8(5), 5, true},
		{"12", 12, true},
		{"x", 0, false},
		{nil, 0, false},
		{1.5, 0, false},
	}
	for _, tt := range tests {
		got, ok := intHeader(amqp.Table{"k": tt.v}, "k")
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("intHeader(%#v) = %d, %v, want %d, %v", tt.v, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"empty URL", Options{}},
		{"not amqp", Options{URL: "http://127.0.0.1/"}},
		{"negative max attempts", Options{URL: "amqp://127.0.0.1/", MaxAttempts: -1}},
		{"negative backoff", Options{URL: "amqp://127.0.0.1/", ReconnectMin: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if q, err := Open(t.Context(), tt.opts); err == nil {
				q.Close()
				t.Errorf("Open(%+v) = nil error, want an error", tt.opts)
			}
		})
	}
	o, err := Options{URL: "amqp://127.0.0.1/"}.withDefaults()
	if err != nil {
		t.Fatalf("withDefaults() = %v", err)
	}
	if o.MaxAttempts != DefaultMaxAttempts || o.MaxRedeliveries != DefaultMaxRedeliveries || o.ReconnectMin != DefaultReconnectMin || o.Logger == nil {
		t.Errorf("withDefaults() = %+v, want the defaults", o)
	}
}

// TestOpenWaitsForBroker opens a URL where nothing listens: Open keeps
// trying until its context ends, and does not show the password.
func TestOpenWaitsForBroker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("net.Listen() = %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	q, err := Open(ctx, Options{URL: "amqp://u:secret@" + addr + "/", ReconnectMin: 10 * time.Millisecond})
	if err == nil {
		q.Close()
		t.Fatal("Open() with no broker = nil error, want an error")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open() with no broker = %v, want %v", err, context.DeadlineExceeded)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("Open() error %q shows the password", err)
	}
}

// FuzzHeaderRoundTrip checks that headers Publish accepts come back
// unchanged from a delivery, and that reserved ones are refused.
func FuzzHeaderRoundTrip(f *testing.F) {
	f.Add("crawl-id", "c-1")
	f.Add(HeaderAttempt, "2")
	f.Add("x-death", "")
	f.Add("naïve", "日本語 ✓")
	f.Add("", "v")
	f.Fuzz(func(t *testing.T, k, v string) {
		in := map[string]string{k: v}
		tbl, err := publishHeaders(in)
		if err != nil {
			return
		}
		if reserved(k) {
			t.Fatalf("publishHeaders accepted reserved header %q", k)
		}
		if diff := cmp.Diff(in, stringHeaders(userTable(tbl))); diff != "" {
			t.Errorf("round trip of %q=%q (-want +got):\n%s", k, v, diff)
		}
	})
}
