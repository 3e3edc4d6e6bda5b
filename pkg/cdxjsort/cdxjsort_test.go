package cdxjsort_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gridcrawl/gridcrawl/pkg/cdxjsort"
	"github.com/gridcrawl/gridcrawl/pkg/warc"
)

// lines returns n CDXJ-like lines in a random order, some of them twice,
// some sharing a prefix with others (a shorter line sorts first).
func lines(n int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var out [][]byte
	for i := range n {
		l := fmt.Appendf(nil, "test,a)/%d 20261123195000 {\"url\": \"http://a.test/%d\", \"offset\": %d}", rng.IntN(n), i%7, rng.IntN(1000))
		out = append(out, l)
		if i%5 == 0 {
			out = append(out, bytes.Clone(l))
		}
		if i%11 == 0 {
			out = append(out, l[:bytes.IndexByte(l, ' ')])
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func merged(t *testing.T, s *cdxjsort.Sorter) []byte {
	t.Helper()
	m, err := s.Merge()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var out []byte
	for {
		l, err := m.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l...)
	}
}

// TestSortsAsSortCDXJ: whether the lines fit in one run or are spilled in
// many, the merge gives what warc.SortCDXJ gives for them in memory
// (sorted bytewise, exact duplicates dropped), and again on a second pass;
// Close removes the runs.
func TestSortsAsSortCDXJ(t *testing.T) {
	in := lines(3000)
	var want []byte
	var withNL [][]byte
	for _, l := range in {
		withNL = append(withNL, append(bytes.Clone(l), '\n'))
	}
	for _, l := range warc.SortCDXJ(withNL) {
		want = append(want, l...)
	}
	for _, tc := range []struct {
		name     string
		runBytes int
		spilled  bool
		fanIn    int
	}{{"in memory", 0, false, 0}, {"spilled", 4000, true, 0}, {"merged three at a time", 4000, true, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := cdxjsort.New(dir, tc.runBytes)
			s.FanIn = tc.fanIn
			for i, l := range in {
				if i%2 == 0 {
					l = append(bytes.Clone(l), '\n')
				}
				if err := s.Add(l); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Add(nil); err != nil { // empty: skipped
				t.Fatal(err)
			}
			if s.Lines() != int64(len(in)) {
				t.Errorf("Lines() = %d, want %d", s.Lines(), len(in))
			}
			if spilled := s.Runs() > 1; spilled != tc.spilled {
				t.Errorf("%d runs spilled; want several: %v", s.Runs(), tc.spilled)
			}
			spilled := s.Runs()
			for pass := range 2 {
				if got := merged(t, s); !bytes.Equal(got, want) {
					t.Fatalf("pass %d: merge differs from SortCDXJ (%d bytes, want %d)", pass, len(got), len(want))
				}
			}
			if tc.fanIn > 0 {
				if spilled <= tc.fanIn || s.Runs() > tc.fanIn {
					t.Errorf("%d runs spilled, %d merged at last; want more than %d, then at most %d", spilled, s.Runs(), tc.fanIn, tc.fanIn)
				}
				if entries, _ := os.ReadDir(dir); len(entries) != s.Runs() {
					t.Errorf("%d files for %d runs: the runs merged into longer ones are not removed", len(entries), s.Runs())
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
				t.Errorf("%d files left in the temporary directory (%v)", len(entries), err)
			}
		})
	}
}

// TestRefusesBadLines: a line over MaxLine or holding a newline is an
// error, not a broken index.
func TestRefusesBadLines(t *testing.T) {
	s := cdxjsort.New(t.TempDir(), 0)
	defer s.Close()
	for _, l := range [][]byte{bytes.Repeat([]byte("x"), cdxjsort.MaxLine+1), []byte("a\nb")} {
		if err := s.Add(l); !errors.Is(err, cdxjsort.ErrLine) {
			t.Errorf("Add(%d bytes) = %v, want ErrLine", len(l), err)
		}
	}
	if got := merged(t, s); len(got) != 0 {
		t.Errorf("refused lines were kept: %q", got[:min(len(got), 40)])
	}
}
