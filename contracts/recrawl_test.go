package contracts_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

func TestParseInterval(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"24h", 24 * time.Hour, true},
		{"30d", 30 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"1.5d", 36 * time.Hour, true},
		{"90s", 90 * time.Second, true},
		{"", 0, false},
		{"d", 0, false},
		{"-1d", 0, false},
		{"-5s", 0, false},
		{"1h2d", 0, false},
		{"1e3d", 0, false},
		{"abc", 0, false},
		{"2dd", 0, false},
	}
	for _, tt := range tests {
		got, err := contracts.ParseInterval(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseInterval(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestRecrawlValidation(t *testing.T) {
	tests := []struct {
		name  string
		r     *contracts.Recrawl
		field string // "" for valid
	}{
		{"fixed", &contracts.Recrawl{Interval: "24h"}, ""},
		{"adaptive", &contracts.Recrawl{Adaptive: &contracts.AdaptiveRecrawl{Min: "1h", Max: "30d"}}, ""},
		{"neither", &contracts.Recrawl{}, "recrawl"},
		{"both", &contracts.Recrawl{Interval: "1h", Adaptive: &contracts.AdaptiveRecrawl{Min: "1h", Max: "2h"}}, "recrawl"},
		{"too short", &contracts.Recrawl{Interval: "500ms"}, "recrawl.interval"},
		{"too long", &contracts.Recrawl{Interval: "400d"}, "recrawl.interval"},
		{"not a duration", &contracts.Recrawl{Interval: "daily"}, "recrawl.interval"},
		{"max below min", &contracts.Recrawl{Adaptive: &contracts.AdaptiveRecrawl{Min: "2h", Max: "1h"}}, "recrawl.adaptive.max"},
		{"min missing", &contracts.Recrawl{Adaptive: &contracts.AdaptiveRecrawl{Max: "1h"}}, "recrawl.adaptive.min"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := contracts.Profile{StartURLs: []string{"http://a.example/"}, Recrawl: tt.r}.WithDefaults()
			err := p.Validate()
			var fe *contracts.FieldError
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field):
				t.Errorf("Validate = %v, want a field error on %q", err, tt.field)
			}
		})
	}
}

func TestRecrawlNext(t *testing.T) {
	fixed := contracts.Recrawl{Interval: "6h"}
	adaptive := contracts.Recrawl{Adaptive: &contracts.AdaptiveRecrawl{Min: "1h", Max: "8h"}}
	h := time.Hour
	tests := []struct {
		r       contracts.Recrawl
		cur     time.Duration
		changed bool
		want    time.Duration
	}{
		{fixed, 0, true, 6 * h},
		{fixed, 6 * h, false, 6 * h},
		{fixed, 6 * h, true, 6 * h},
		{adaptive, 0, true, h},
		{adaptive, h, false, 2 * h},
		{adaptive, 4 * h, false, 8 * h},
		{adaptive, 8 * h, false, 8 * h},
		{adaptive, 8 * h, true, 4 * h},
		{adaptive, h, true, h},
		{adaptive, 20 * h, false, 8 * h}, // max lowered by a PATCH
	}
	for _, tt := range tests {
		if got := tt.r.Next(tt.cur, tt.changed); got != tt.want {
			t.Errorf("%+v.Next(%v, changed %v) = %v, want %v", tt.r, tt.cur, tt.changed, got, tt.want)
		}
	}
}
