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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// Why names the term that set a group's delay, for the frontier report.
type Why string

// The terms of a delay, in the order they are applied.
const (
	// WhyFactor: delayFactor × fetch duration, inside [Min, Max].
	WhyFactor Why = "factor"
	// WhyMin: delayFactor × fetch duration was below Min.
	WhyMin Why = "min"
	// WhyMax: delayFactor × fetch duration was above Max.
	WhyMax Why = "max"
	// WhyCrawlDelay: the robots.txt Crawl-delay (capped) was longer.
	WhyCrawlDelay Why = "crawl-delay"
	// WhyRetryAfter: a 429 or 503 response's Retry-After (capped) was longer.
	WhyRetryAfter Why = "retry-after"
	// WhyBackoff: the backoff for server trouble was longer.
	WhyBackoff Why = "backoff"
)

// ErrorKind classifies a failed fetch for the delay policy.
type ErrorKind uint8

// Error kinds. Timeouts and resets count as server trouble and raise the
// backoff; other errors (DNS, TLS, refused by policy...) do not.
const (
	ErrorNone ErrorKind = iota
	ErrorTimeout
	ErrorReset
	ErrorOther
)

// String returns the kind's name.
func (k ErrorKind) String() string {
	switch k {
	case ErrorNone:
		return "none"
	case ErrorTimeout:
		return "timeout"
	case ErrorReset:
		return "reset"
	case ErrorOther:
		return "other"
	}
	return "ErrorKind(" + strconv.Itoa(int(k)) + ")"
}

// ClassifyError maps a fetch error to its kind: deadlines and network
// timeouts are ErrorTimeout; connection resets, aborts, refusals, broken
// pipes and truncated responses are ErrorReset; anything else is ErrorOther.
func ClassifyError(err error) ErrorKind {
	if err == nil {
		return ErrorNone
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return ErrorTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ErrorTimeout
	}
	for _, e := range []error{syscall.ECONNRESET, syscall.ECONNABORTED, syscall.ECONNREFUSED, syscall.EPIPE, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return ErrorReset
		}
	}
	return ErrorOther
}

// Outcome is what a fetch reported back, passed to [Scheduler.Release].
type Outcome struct {
	// Duration is how long the fetch took.
	Duration time.Duration
	// Status is the HTTP status code, or 0 when there was no response.
	Status int
	// ErrKind classifies a failed fetch (see ClassifyError).
	ErrKind ErrorKind
	// Err is the fetch error, if any; its text is shown in the report.
	Err error
	// RetryAfter is the raw Retry-After header of the response.
	RetryAfter string
	// CrawlDelay is the robots.txt Crawl-delay that applies to the host, or 0.
	CrawlDelay time.Duration
	// Unfetched reports that the lease fetched nothing (the item was only
	// held back, say because its crawl is paused): its cost is refunded and
	// the group owes no delay.
	Unfetched bool
	// Policy, when set, decides this delay instead of the group's policy: the
	// politeness settings of the crawl whose URL was fetched. The group's
	// backoff state carries over between policies.
	Policy *DelayPolicy
}

// trouble reports whether o is server feedback that raises the backoff.
func (o Outcome) trouble() bool {
	return o.Status == http.StatusTooManyRequests || o.Status == http.StatusServiceUnavailable ||
		o.ErrKind == ErrorTimeout || o.ErrKind == ErrorReset
}

// DelayPolicy computes the delay between two fetches from one group:
//
//	base  = clamp(Factor × fetch duration, Min, Max)
//	delay = max(base, min(Crawl-delay, CrawlDelayCap), feedback)
//
// where feedback is, for a 429 or 503 response with a valid Retry-After,
// min(Retry-After, RetryAfterCap); otherwise, while the group is backing off,
// BackoffBase × BackoffMultiplier^(level-1) capped at BackoffMax, minus a
// random jitter of up to Jitter of it. Each 429, 503, timeout or reset raises
// the backoff level by one; a success at least ForgiveAfter after the last
// trouble resets it to zero. Until then successes keep the current level.
type DelayPolicy struct {
	// Factor multiplies the fetch duration.
	Factor float64 `json:"factor"`
	// Min is the least delay.
	Min time.Duration `json:"min"`
	// Max caps Factor × fetch duration (not the other terms); 0 means no cap.
	Max time.Duration `json:"max"`
	// CrawlDelayCap caps a robots.txt Crawl-delay; a larger one is clamped to
	// it (never an error). 0 means no cap.
	CrawlDelayCap time.Duration `json:"crawl_delay_cap"`
	// RetryAfterCap caps a Retry-After. 0 means no cap.
	RetryAfterCap time.Duration `json:"retry_after_cap"`
	// BackoffBase is the backoff at level 1.
	BackoffBase time.Duration `json:"backoff_base"`
	// BackoffMultiplier grows the backoff per level (values below 1 count as 1).
	BackoffMultiplier float64 `json:"backoff_multiplier"`
	// BackoffMax caps the backoff. 0 means no cap.
	BackoffMax time.Duration `json:"backoff_max"`
	// Jitter is the largest fraction, in [0, 1], taken off a backoff at random.
	Jitter float64 `json:"jitter"`
	// ForgiveAfter is the quiet period after the last trouble after which a
	// success resets the backoff.
	ForgiveAfter time.Duration `json:"forgive_after"`
	// Version names the settings the policy comes from (a crawl profile's
	// version), for the frontier report; it changes no delay.
	Version int `json:"version,omitempty"`
}

// DefaultDelayPolicy returns the policy used when none is configured: the
// profile defaults of package contracts (factor 2, 500ms to 10s), Crawl-delay
// capped at 60s, Retry-After at 10 minutes, backoff 5s doubling to 5 minutes
// with 20% jitter, forgiven after 2 quiet minutes.
func DefaultDelayPolicy() DelayPolicy {
	return DelayPolicy{
		Factor:            contracts.DefaultFactor,
		Min:               contracts.DefaultMinDelayMS * time.Millisecond,
		Max:               contracts.DefaultMaxDelayMS * time.Millisecond,
		CrawlDelayCap:     time.Minute,
		RetryAfterCap:     10 * time.Minute,
		BackoffBase:       5 * time.Second,
		BackoffMultiplier: 2,
		BackoffMax:        5 * time.Minute,
		Jitter:            0.2,
		ForgiveAfter:      2 * time.Minute,
	}
}

// DelayPolicyFor returns DefaultDelayPolicy with a crawl profile's factor,
// minimum and maximum (after contracts.Profile.WithDefaults). A profile's
// max_delay_ms of 0 is an explicit cap of 0 (so its min_delay_ms is 0 too),
// while a DelayPolicy's Max of 0 means no cap: the factor term is dropped
// instead, which caps it at 0.
func DelayPolicyFor(p contracts.Politeness) DelayPolicy {
	d := DefaultDelayPolicy()
	d.Factor = p.DelayFactor
	d.Min, d.Max = p.Delay()
	if d.Max == 0 {
		d.Factor = 0
	}
	return d
}

// Validate reports the first invalid field of p.
func (p DelayPolicy) Validate() error {
	switch {
	case p.Factor < 0 || math.IsNaN(p.Factor) || math.IsInf(p.Factor, 0):
		return fmt.Errorf("validate delay policy: factor %v must be a finite number >= 0", p.Factor)
	case p.Min < 0:
		return fmt.Errorf("validate delay policy: min %v must not be negative", p.Min)
	case p.Max < 0 || (p.Max > 0 && p.Max < p.Min):
		return fmt.Errorf("validate delay policy: max %v must be 0 or at least min %v", p.Max, p.Min)
	case p.CrawlDelayCap < 0 || p.RetryAfterCap < 0 || p.BackoffBase < 0 || p.BackoffMax < 0 || p.ForgiveAfter < 0:
		return errors.New("validate delay policy: durations must not be negative")
	case math.IsNaN(p.BackoffMultiplier) || math.IsInf(p.BackoffMultiplier, 0):
		return fmt.Errorf("validate delay policy: backoff multiplier %v must be finite", p.BackoffMultiplier)
	case !(p.Jitter >= 0 && p.Jitter <= 1):
		return fmt.Errorf("validate delay policy: jitter %v must be in [0, 1]", p.Jitter)
	}
	return nil
}

// Backoff is a group's backoff state, kept between decisions.
type Backoff struct {
	// Level counts trouble since the backoff was last forgiven.
	Level int `json:"level"`
	// LastTrouble is when the last trouble was reported.
	LastTrouble time.Time `json:"last_trouble"`
}

// maxBackoffLevel bounds Level so that the growth computation stays finite.
const maxBackoffLevel = 64

// Decision is a computed delay and its breakdown.
type Decision struct {
	// Delay is the time to wait before the group's next fetch.
	Delay time.Duration `json:"delay"`
	// Why names the term that set Delay.
	Why Why `json:"why"`
	// Factor is delayFactor × fetch duration, before clamping.
	Factor time.Duration `json:"factor"`
	// Base is Factor clamped to [Min, Max].
	Base time.Duration `json:"base"`
	// CrawlDelay is the capped Crawl-delay term, 0 if none.
	CrawlDelay time.Duration `json:"crawl_delay,omitempty"`
	// RetryAfter is the capped Retry-After term, 0 if none.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// Backoff is the backoff term, 0 if none.
	Backoff time.Duration `json:"backoff,omitempty"`
	// BackoffLevel is the backoff level after this outcome.
	BackoffLevel int `json:"backoff_level,omitempty"`
}

// Decide computes the delay after outcome o at time now, updating the
// group's backoff state b. rnd, in [0, 1), draws the jitter.
func (p DelayPolicy) Decide(b *Backoff, o Outcome, now time.Time, rnd float64) Decision {
	var d Decision
	d.Factor = scale(o.Duration, p.Factor)
	d.Base, d.Why = d.Factor, WhyFactor
	if d.Base < p.Min {
		d.Base, d.Why = p.Min, WhyMin
	}
	if p.Max > 0 && d.Base > p.Max {
		d.Base, d.Why = p.Max, WhyMax
	}
	d.Delay = d.Base
	if o.CrawlDelay > 0 {
		d.CrawlDelay = capped(o.CrawlDelay, p.CrawlDelayCap)
		if d.CrawlDelay > d.Delay {
			d.Delay, d.Why = d.CrawlDelay, WhyCrawlDelay
		}
	}
	if o.trouble() {
		if b.Level < maxBackoffLevel {
			b.Level++
		}
		b.LastTrouble = now
	} else if b.Level > 0 && now.Sub(b.LastTrouble) >= p.ForgiveAfter {
		*b = Backoff{}
	}
	d.BackoffLevel = b.Level
	if o.Status == http.StatusTooManyRequests || o.Status == http.StatusServiceUnavailable {
		if ra, ok := ParseRetryAfter(o.RetryAfter, now); ok {
			d.RetryAfter = capped(ra, p.RetryAfterCap)
			if d.RetryAfter > d.Delay {
				d.Delay, d.Why = d.RetryAfter, WhyRetryAfter
			}
			return d
		}
	}
	if b.Level > 0 {
		d.Backoff = p.backoff(b.Level, rnd)
		if d.Backoff > d.Delay {
			d.Delay, d.Why = d.Backoff, WhyBackoff
		}
	}
	return d
}

// backoff returns the backoff at level (>= 1) with jitter drawn from rnd.
func (p DelayPolicy) backoff(level int, rnd float64) time.Duration {
	m := max(p.BackoffMultiplier, 1)
	f := float64(p.BackoffBase) * math.Pow(m, float64(level-1))
	if p.BackoffMax > 0 {
		f = min(f, float64(p.BackoffMax))
	}
	f -= f * p.Jitter * min(max(rnd, 0), 1)
	return durationOf(f)
}

// scale returns d × f, saturating instead of overflowing.
func scale(d time.Duration, f float64) time.Duration {
	if d <= 0 || f <= 0 {
		return 0
	}
	return durationOf(float64(d) * f)
}

// durationOf converts nanoseconds to a Duration, saturating.
func durationOf(f float64) time.Duration {
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	if f <= 0 || math.IsNaN(f) {
		return 0
	}
	return time.Duration(f)
}

// capped returns min(d, limit), or d when limit is 0.
func capped(d, limit time.Duration) time.Duration {
	if limit > 0 && d > limit {
		return limit
	}
	return d
}

// ParseRetryAfter parses a Retry-After header value (RFC 9110 §10.2.3):
// either a number of seconds or an HTTP date, which is converted to the time
// left after now (0 if it has passed). Surrounding spaces are ignored; an
// absurdly large number of seconds saturates. It reports false for anything
// else, including negative or fractional numbers.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if allDigits(v) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > math.MaxInt64/int64(time.Second) {
			return math.MaxInt64, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
