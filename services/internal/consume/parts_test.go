package consume

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// partsDelivery is a delivery that notes how it was settled.
type partsDelivery struct {
	mu      sync.Mutex
	settles []string
}

func (d *partsDelivery) note(s string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.settles = append(d.settles, s)
	return nil
}

func (d *partsDelivery) got() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.settles...)
}

func (d *partsDelivery) Body() []byte                                  { return nil }
func (d *partsDelivery) Headers() map[string]string                    { return nil }
func (d *partsDelivery) Attempt() int                                  { return 1 }
func (d *partsDelivery) Redelivered() bool                             { return false }
func (d *partsDelivery) Ack(context.Context) error                     { return d.note("ack") }
func (d *partsDelivery) Retry(context.Context, time.Duration) error    { return d.note("retry") }
func (d *partsDelivery) Postpone(context.Context, time.Duration) error { return d.note("postpone") }
func (d *partsDelivery) DeadLetter(context.Context, string) error      { return d.note("dead-letter") }

// TestParts: a delivery of several parts is settled once, by its last part:
// acked when every part is durable, retried when one failed; one whose
// parts were given up is not settled, and what it held is released either
// way.
func TestParts(t *testing.T) {
	tests := []struct {
		name string
		ends []error // nil: done; errDrop: dropped
		want []string
	}{
		{name: "all durable", ends: []error{nil, nil, nil}, want: []string{"ack"}},
		{name: "one failed", ends: []error{nil, errors.New("store down"), nil}, want: []string{"retry"}},
		{name: "given up", ends: []error{errDrop, errDrop}, want: nil},
		{name: "one part", ends: []error{nil}, want: []string{"ack"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newShell(nil, nil, 1)
			d := &partsDelivery{}
			p := s.Parts(d, len(tc.ends))
			released := 0
			p.OnSettled(func() { released++ })
			for i, err := range tc.ends {
				if i < len(tc.ends)-1 && len(d.got()) > 0 {
					t.Fatalf("settled after %d of %d parts", i, len(tc.ends))
				}
				if errors.Is(err, errDrop) {
					p.Drop()
				} else {
					p.Done(t.Context(), err)
				}
			}
			if got := d.got(); !slices.Equal(got, tc.want) {
				t.Errorf("settles = %q, want %q", got, tc.want)
			}
			if released != 1 {
				t.Errorf("released %d times, want once", released)
			}
		})
	}
}

var errDrop = errors.New("drop")
