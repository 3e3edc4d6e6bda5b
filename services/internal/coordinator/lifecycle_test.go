package coordinator

import (
	"testing"

	"github.com/gridcrawl/gridcrawl/contracts"
)

func TestOutOfWork(t *testing.T) {
	tests := []struct {
		name   string
		counts map[contracts.Status]int64
		want   bool
	}{
		{"no records", map[contracts.Status]int64{}, false},
		{"only zero counts", map[contracts.Status]int64{contracts.Indexed: 0, contracts.ToBeLoaded: 0}, false},
		{"all indexed", map[contracts.Status]int64{contracts.Indexed: 3}, true},
		{"every terminal status", map[contracts.Status]int64{contracts.Indexed: 3, contracts.Redirected: 1, contracts.Failed: 2}, true},
		{"terminal and retired", map[contracts.Status]int64{contracts.Indexed: 3, contracts.Retired: 4}, true},
		{"only retired", map[contracts.Status]int64{contracts.Retired: 4}, true},
		{"one to be loaded", map[contracts.Status]int64{contracts.Indexed: 3, contracts.ToBeLoaded: 1}, false},
		{"one to be parsed", map[contracts.Status]int64{contracts.Indexed: 3, contracts.ToBeParsed: 1}, false},
		{"one to be indexed", map[contracts.Status]int64{contracts.Indexed: 3, contracts.Failed: 1, contracts.ToBeIndexed: 1}, false},
		{"an unknown status", map[contracts.Status]int64{contracts.Indexed: 3, "to-be-invented": 1}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := OutOfWork(tc.counts); got != tc.want {
				t.Errorf("OutOfWork(%v) = %v, want %v", tc.counts, got, tc.want)
			}
		})
	}
}
