package politeness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gridcrawl/gridcrawl/contracts"
)

func testPolicy() DelayPolicy {
	return DelayPolicy{
		Factor:            2,
		Min:               time.Second,
		Max:               10 * time.Second,
		CrawlDelayCap:     30 * time.Second,
		RetryAfterCap:     time.Minute,
		BackoffBase:       5 * time.Second,
		BackoffMultiplier: 2,
		BackoffMax:        40 * time.Second,
		Jitter:            0.5,
		ForgiveAfter:      time.Minute,
	}
}

func TestDecideTerms(t *testing.T) {
	now := t0
	tests := []struct {
		name    string
		backoff Backoff
		o       Outcome
		want    Decision
	}{
		{
			name: "factor",
			o:    Outcome{Duration: 2 * time.Second, Status: 200},
			want: Decision{Delay: 4 * time.Second, Why: WhyFactor, Factor: 4 * time.Second, Base: 4 * time.Second},
		},
		{
			name: "min",
			o:    Outcome{Duration: 100 * time.Millisecond, Status: 200},
			want: Decision{Delay: time.Second, Why: WhyMin, Factor: 200 * time.Millisecond, Base: time.Second},
		},
		{
			name: "max",
			o:    Outcome{Duration: time.Minute, Status: 200},
			want: Decision{Delay: 10 * time.Second, Why: WhyMax, Factor: 2 * time.Minute, Base: 10 * time.Second},
		},
		{
			name: "crawl-delay",
			o:    Outcome{Duration: time.Second, Status: 200, CrawlDelay: 15 * time.Second},
			want: Decision{Delay: 15 * time.Second, Why: WhyCrawlDelay, Factor: 2 * time.Second, Base: 2 * time.Second, CrawlDelay: 15 * time.Second},
		},
		{
			name: "crawl-delay capped, never an error",
			o:    Outcome{Duration: time.Second, Status: 200, CrawlDelay: time.Hour},
			want: Decision{Delay: 30 * time.Second, Why: WhyCrawlDelay, Factor: 2 * time.Second, Base: 2 * time.Second, CrawlDelay: 30 * time.Second},
		},
		{
			name: "crawl-delay shorter than base",
			o:    Outcome{Duration: 3 * time.Second, Status: 200, CrawlDelay: time.Second},
			want: Decision{Delay: 6 * time.Second, Why: WhyFactor, Factor: 6 * time.Second, Base: 6 * time.Second, CrawlDelay: time.Second},
		},
		{
			name: "retry-after seconds on 503",
			o:    Outcome{Duration: time.Second, Status: 503, RetryAfter: "20"},
			want: Decision{Delay: 20 * time.Second, Why: WhyRetryAfter, Factor: 2 * time.Second, Base: 2 * time.Second, RetryAfter: 20 * time.Second, BackoffLevel: 1},
		},
		{
			name: "retry-after date on 429, capped",
			o:    Outcome{Duration: time.Second, Status: 429, RetryAfter: now.Add(time.Hour).Format(http.TimeFormat)},
			want: Decision{Delay: time.Minute, Why: WhyRetryAfter, Factor: 2 * time.Second, Base: 2 * time.Second, RetryAfter: time.Minute, BackoffLevel: 1},
		},
		{
			name: "retry-after beats crawl-delay",
			o:    Outcome{Duration: time.Second, Status: 503, RetryAfter: "25", CrawlDelay: 20 * time.Second},
			want: Decision{Delay: 25 * time.Second, Why: WhyRetryAfter, Factor: 2 * time.Second, Base: 2 * time.Second, CrawlDelay: 20 * time.Second, RetryAfter: 25 * time.Second, BackoffLevel: 1},
		},
		{
			name: "retry-after ignored on 200",
			o:    Outcome{Duration: time.Second, Status: 200, RetryAfter: "20"},
			want: Decision{Delay: 2 * time.Second, Why: WhyFactor, Factor: 2 * time.Second, Base: 2 * time.Second},
		},
		{
			name: "503 without retry-after backs off",
			o:    Outcome{Duration: time.Second, Status: 503},
			want: Decision{Delay: 5 * time.Second, Why: WhyBackoff, Factor: 2 * time.Second, Base: 2 * time.Second, Backoff: 5 * time.Second, BackoffLevel: 1},
		},
		{
			name: "429 with garbage retry-after backs off",
			o:    Outcome{Duration: time.Second, Status: 429, RetryAfter: "soon"},
			want: Decision{Delay: 5 * time.Second, Why: WhyBackoff, Factor: 2 * time.Second, Base: 2 * time.Second, Backoff: 5 * time.Second, BackoffLevel: 1},
		},
		{
			name:    "timeout grows the backoff",
			backoff: Backoff{Level: 2, LastTrouble: now.Add(-time.Second)},
			o:       Outcome{Duration: 30 * time.Second, ErrKind: ErrorTimeout},
			want:    Decision{Delay: 20 * time.Second, Why: WhyBackoff, Factor: time.Minute, Base: 10 * time.Second, Backoff: 20 * time.Second, BackoffLevel: 3},
		},
		{
			name:    "reset grows the backoff to its cap",
			backoff: Backoff{Level: 9, LastTrouble: now.Add(-time.Second)},
			o:       Outcome{ErrKind: ErrorReset},
			want:    Decision{Delay: 40 * time.Second, Why: WhyBackoff, Base: time.Second, Backoff: 40 * time.Second, BackoffLevel: 10},
		},
		{
			name:    "other errors do not back off",
			o:       Outcome{Duration: time.Second, ErrKind: ErrorOther},
			want:    Decision{Delay: 2 * time.Second, Why: WhyFactor, Factor: 2 * time.Second, Base: 2 * time.Second},
			backoff: Backoff{},
		},
		{
			name:    "success before the quiet period keeps the backoff",
			backoff: Backoff{Level: 2, LastTrouble: now.Add(-30 * time.Second)},
			o:       Outcome{Duration: time.Second, Status: 200},
			want:    Decision{Delay: 10 * time.Second, Why: WhyBackoff, Factor: 2 * time.Second, Base: 2 * time.Second, Backoff: 10 * time.Second, BackoffLevel: 2},
		},
		{
			name:    "success after the quiet period forgives",
			backoff: Backoff{Level: 5, LastTrouble: now.Add(-time.Minute)},
			o:       Outcome{Duration: time.Second, Status: 200},
			want:    Decision{Delay: 2 * time.Second, Why: WhyFactor, Factor: 2 * time.Second, Base: 2 * time.Second},
		},
		{
			name:    "backoff shorter than crawl-delay",
			backoff: Backoff{Level: 1, LastTrouble: now.Add(-time.Second)},
			o:       Outcome{Duration: time.Second, Status: 200, CrawlDelay: 25 * time.Second},
			want:    Decision{Delay: 25 * time.Second, Why: WhyCrawlDelay, Factor: 2 * time.Second, Base: 2 * time.Second, CrawlDelay: 25 * time.Second, Backoff: 5 * time.Second, BackoffLevel: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.backoff
			got := testPolicy().Decide(&b, tt.o, now, 0)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decide(%+v) mismatch (-want +got):\n%s", tt.o, diff)
			}
		})
	}
}

func TestBackoffGrowthCapJitterAndForgiveness(t *testing.T) {
	p := testPolicy()
	var b Backoff
	now := t0
	var got []time.Duration
	for range 6 {
		now = now.Add(time.Second)
		got = append(got, p.Decide(&b, Outcome{Status: 503}, now, 0).Backoff)
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second, 40 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoff after consecutive 503s mismatch (-want +got):\n%s", diff)
	}

	// Jitter takes up to Jitter of the backoff off, never adds.
	for _, r := range []float64{0, 0.25, 0.5, 0.999} {
		bb := Backoff{Level: 3, LastTrouble: now}
		d := p.Decide(&bb, Outcome{Status: 200}, now, r)
		want := time.Duration(float64(20*time.Second) * (1 - 0.5*r))
		if diff := d.Backoff - want; diff < -time.Microsecond || diff > time.Microsecond {
			t.Errorf("Decide(level 3, rnd %v).Backoff = %v, want %v", r, d.Backoff, want)
		}
	}

	// Quiet successes: kept before ForgiveAfter, forgiven at it.
	last := b.LastTrouble
	if d := p.Decide(&b, Outcome{Status: 200}, last.Add(59*time.Second), 0); d.Why != WhyBackoff || b.Level != 6 {
		t.Errorf("success 59s after trouble: why %q level %d, want %q level 6", d.Why, b.Level, WhyBackoff)
	}
	if d := p.Decide(&b, Outcome{Status: 200}, last.Add(time.Minute), 0); d.Why != WhyMin || b.Level != 0 || d.Backoff != 0 {
		t.Errorf("success 60s after trouble: why %q level %d backoff %v, want %q level 0 backoff 0", d.Why, b.Level, d.Backoff, WhyMin)
	}
	// A new trouble starts over from the base.
	if d := p.Decide(&b, Outcome{ErrKind: ErrorTimeout}, last.Add(2*time.Minute), 0); d.Backoff != 5*time.Second {
		t.Errorf("first trouble after forgiveness: backoff %v, want 5s", d.Backoff)
	}
}

func TestBackoffLevelSaturates(t *testing.T) {
	p := DelayPolicy{BackoffBase: time.Second, BackoffMultiplier: 10}
	b := Backoff{}
	var d Decision
	for range 200 {
		d = p.Decide(&b, Outcome{ErrKind: ErrorReset}, t0, 0)
	}
	if b.Level != maxBackoffLevel || d.Delay != math.MaxInt64 {
		t.Errorf("after 200 resets without cap: level %d delay %v, want %d and saturated", b.Level, d.Delay, maxBackoffLevel)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := t0
	tests := []struct {
		name   string
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"seconds", "120", 2 * time.Minute, true},
		{"zero", "0", 0, true},
		{"spaces", "  7 ", 7 * time.Second, true},
		{"huge saturates", "99999999999999999999999", math.MaxInt64, true},
		{"IMF-fixdate", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"RFC 850", "Saturday, 01-Jan-22 00:01:00 GMT", time.Minute, true},
		{"asctime", "Sat Jan  1 00:00:30 2022", 30 * time.Second, true},
		{"past date", "Fri, 31 Dec 2021 23:00:00 GMT", 0, true},
		{"empty", "", 0, false},
		{"negative", "-5", 0, false},
		{"fraction", "1.5", 0, false},
		{"garbage", "tomorrow", 0, false},
		{"number with unit", "10s", 0, false},
		{"date without zone", "2022-01-01T00:01:00", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tt.in, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %v, %v, want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "", "-1", "Sat, 01 Jan 2022 00:01:00 GMT", "Sat Jan  1 00:00:30 2022", "99999999999999999999", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseRetryAfter(s, t0)
		if d < 0 {
			t.Errorf("ParseRetryAfter(%q) = %v, want >= 0", s, d)
		}
		if !ok && d != 0 {
			t.Errorf("ParseRetryAfter(%q) = %v, false, want 0 when invalid", s, d)
		}
		// Whatever a server sends, the decision stays within the caps.
		p := testPolicy()
		var b Backoff
		got := p.Decide(&b, Outcome{Status: 503, RetryAfter: s}, t0, 0.5)
		if got.Delay > p.RetryAfterCap && got.Delay > p.BackoffMax {
			t.Errorf("Decide(503, Retry-After %q).Delay = %v, above both caps", s, got.Delay)
		}
	})
}

func TestClassifyError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want ErrorKind
	}{
		{"nil", nil, ErrorNone},
		{"context deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), ErrorTimeout},
		{"os deadline", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, ErrorTimeout},
		{"dns timeout", &net.DNSError{Err: "i/o timeout", IsTimeout: true}, ErrorTimeout},
		{"reset", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, ErrorReset},
		{"refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, ErrorReset},
		{"truncated", fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), ErrorReset},
		{"dns not found", &net.DNSError{Err: "no such host", IsNotFound: true}, ErrorOther},
		{"other", errors.New("tls: bad certificate"), ErrorOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyError(tt.err); got != tt.want {
				t.Errorf("ClassifyError(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestClassifyLoopbackErrors classifies real errors from loopback sockets.
func TestClassifyLoopbackErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = net.Dial("tcp", addr)
	if got := ClassifyError(err); got != ErrorReset {
		t.Errorf("ClassifyError(dial closed port: %v) = %v, want %v", err, got, ErrorReset)
	}

	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetReadDeadline(time.Now().Add(time.Millisecond)); err != nil {
		t.Fatalf("set deadline: %v", err)
	}
	_, err = c.Read(make([]byte, 1))
	if got := ClassifyError(err); got != ErrorTimeout {
		t.Errorf("ClassifyError(read past deadline: %v) = %v, want %v", err, got, ErrorTimeout)
	}
}

func TestDelayPolicyForProfile(t *testing.T) {
	p := DelayPolicyFor(contracts.Profile{}.WithDefaults().Politeness)
	if p.Factor != 2 || p.Min != 500*time.Millisecond || p.Max != 10*time.Second {
		t.Errorf("DelayPolicyFor(defaults) = factor %v min %v max %v, want 2, 500ms, 10s", p.Factor, p.Min, p.Max)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("DelayPolicyFor(defaults).Validate() = %v", err)
	}
	if p.CrawlDelayCap != DefaultDelayPolicy().CrawlDelayCap {
		t.Errorf("DelayPolicyFor kept CrawlDelayCap %v, want the default", p.CrawlDelayCap)
	}
	// A profile's explicit max_delay_ms 0 caps the factor term at 0, where a
	// DelayPolicy's Max 0 would mean no cap.
	zero := DelayPolicyFor(contracts.Politeness{DelayFactor: 2, Robots: contracts.RobotsObey})
	if d := zero.Decide(&Backoff{}, Outcome{Status: 200, Duration: time.Second}, t0, 0); d.Delay != 0 {
		t.Errorf("DelayPolicyFor(max 0, factor 2).Decide(1s fetch) = %v, want 0", d.Delay)
	}
}

func TestDelayPolicyValidate(t *testing.T) {
	tests := []struct {
		name string
		p    DelayPolicy
		ok   bool
	}{
		{"default", DefaultDelayPolicy(), true},
		{"zero", DelayPolicy{}, true},
		{"negative factor", DelayPolicy{Factor: -1}, false},
		{"NaN factor", DelayPolicy{Factor: math.NaN()}, false},
		{"max below min", DelayPolicy{Min: 2 * time.Second, Max: time.Second}, false},
		{"negative cap", DelayPolicy{CrawlDelayCap: -1}, false},
		{"jitter above 1", DelayPolicy{Jitter: 1.5}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.p.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate(%+v) = %v, want ok %v", tt.p, err, tt.ok)
			}
		})
	}
}
