// Package cdxjsort sorts the lines of a CDXJ index too large to hold in
// memory: lines are gathered in bounded runs, each run sorted and spilled to
// a temporary file, and the runs merged as the index is read back, sorted
// bytewise (as pywb expects) and without exact duplicates, as
// warc.SortCDXJ sorts lines in memory.
package cdxjsort

import (
	"bufio"
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// RunBytes is the default bound of the lines sorted in memory at once.
const RunBytes = 8 << 20

// MaxLine bounds one line.
const MaxLine = 1 << 20

// FanIn is the default of Sorter.FanIn.
const FanIn = 64

// ErrLine is the error of a line longer than MaxLine or holding a newline.
var ErrLine = errors.New("index line too long or not one line")

// lineOverhead is what a line costs in memory beyond its bytes (its slice
// header in the run).
const lineOverhead = 24

// Sorter gathers lines and sorts them. Memory is bounded by its RunBytes
// plus the line being added; the lines beyond are in temporary files until
// Close. A Sorter is not safe for concurrent use.
type Sorter struct {
	// FanIn bounds the spilled runs merged at once (0 for FanIn, at least
	// 2): with more, Merge first merges them FanIn at a time into longer
	// runs, so that the open files and their read buffers (64 KiB each)
	// stay bounded however large the index.
	FanIn int

	dir      string
	runBytes int
	run      [][]byte
	size     int
	sorted   bool
	runs     []string
	lines    int64
}

// New returns a Sorter whose runs are spilled to files in dir ("" for
// os.TempDir) once they hold runBytes (0 or less for RunBytes).
func New(dir string, runBytes int) *Sorter {
	if runBytes <= 0 {
		runBytes = RunBytes
	}
	return &Sorter{dir: dir, runBytes: runBytes}
}

// Add adds a line, with or without its newline (the sorted lines end with
// one); an empty line is skipped. The line is copied. It fails with ErrLine
// for a line too long or holding a newline, and when a run cannot be
// spilled.
func (s *Sorter) Add(line []byte) error {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) == 0 {
		return nil
	}
	if len(line) > MaxLine || bytes.IndexByte(line, '\n') >= 0 {
		return ErrLine
	}
	l := make([]byte, len(line)+1)
	copy(l, line)
	l[len(line)] = '\n'
	s.run = append(s.run, l)
	s.sorted = false
	s.size += len(l) + lineOverhead
	s.lines++
	if s.size >= s.runBytes {
		return s.spill()
	}
	return nil
}

// Lines is the number of lines added (duplicates included).
func (s *Sorter) Lines() int64 { return s.lines }

// Runs is the number of runs spilled to files so far.
func (s *Sorter) Runs() int { return len(s.runs) }

// spill sorts the run in memory and writes it to a temporary file.
func (s *Sorter) spill() error {
	if len(s.run) == 0 {
		return nil
	}
	s.sortRun()
	f, err := os.CreateTemp(s.dir, "cdxj-run-*")
	if err != nil {
		return fmt.Errorf("spill index run: %w", err)
	}
	s.runs = append(s.runs, f.Name())
	bw := bufio.NewWriterSize(f, 64<<10)
	for _, l := range s.run {
		_, _ = bw.Write(l) // the error stays in bw
	}
	err = bw.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("spill index run: %w", err)
	}
	clear(s.run)
	s.run, s.size = s.run[:0], 0
	return nil
}

func (s *Sorter) sortRun() {
	if !s.sorted {
		slices.SortFunc(s.run, bytes.Compare)
		s.sorted = true
	}
}

// Merge returns the lines added so far, sorted, without duplicates: the
// spilled runs and the one still in memory, merged. Lines added after are
// not in it. It may be called again for another pass; each Merger is
// closed by its caller, and the Sorter must outlive it.
func (s *Sorter) Merge() (*Merger, error) {
	s.sortRun()
	fanIn := s.FanIn
	if fanIn <= 0 {
		fanIn = FanIn
	}
	fanIn = max(fanIn, 2)
	for len(s.runs) > fanIn {
		if err := s.mergeRuns(fanIn); err != nil {
			return nil, err
		}
	}
	var mem [][]byte
	if len(s.run) > 0 {
		mem = s.run
	}
	return newMerger(s.runs, mem)
}

// mergeRuns merges the first n spilled runs into one, which goes last.
func (s *Sorter) mergeRuns(n int) error {
	m, err := newMerger(s.runs[:n], nil)
	if err != nil {
		return err
	}
	defer m.Close()
	f, err := os.CreateTemp(s.dir, "cdxj-run-*")
	if err != nil {
		return fmt.Errorf("merge index runs: %w", err)
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	for {
		l, rerr := m.Next()
		if rerr == io.EOF {
			break
		}
		if rerr == nil {
			_, rerr = bw.Write(l)
		}
		if rerr != nil {
			err = rerr
			break
		}
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("merge index runs: %w", err)
	}
	m.Close()
	merged := slices.Clone(s.runs[:n])
	s.runs = append(s.runs[n:], f.Name())
	for _, r := range merged {
		if err := os.Remove(r); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove index run: %w", err)
		}
	}
	return nil
}

// newMerger merges the run files and the sorted lines in memory.
func newMerger(runs []string, mem [][]byte) (*Merger, error) {
	m := &Merger{}
	for _, name := range runs {
		f, err := os.Open(name)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("open index run: %w", err)
		}
		m.files = append(m.files, f)
		m.h = append(m.h, &source{r: bufio.NewReaderSize(f, 64<<10)})
	}
	if len(mem) > 0 {
		m.h = append(m.h, &source{mem: mem})
	}
	live := m.h[:0]
	for _, src := range m.h {
		ok, err := src.advance()
		if err != nil {
			m.Close()
			return nil, err
		}
		if ok {
			live = append(live, src)
		}
	}
	m.h = live
	heap.Init(&m.h)
	return m, nil
}

// Close removes the spilled runs and lets the lines in memory go.
func (s *Sorter) Close() error {
	var errs []error
	for _, r := range s.runs {
		if err := os.Remove(r); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove index run: %w", err))
		}
	}
	s.runs, s.run, s.size = nil, nil, 0
	return errors.Join(errs...)
}

// Merger reads sorted runs in order, dropping a line equal to the one
// before.
type Merger struct {
	files []*os.File
	h     sourceHeap
	last  []byte
}

// Next returns the next line in order, with its newline (valid until the
// next call), and io.EOF after the last.
func (m *Merger) Next() ([]byte, error) {
	for len(m.h) > 0 {
		top := m.h[0]
		l := top.line
		ok, err := top.advance()
		if err != nil {
			return nil, err
		}
		if ok {
			heap.Fix(&m.h, 0)
		} else {
			heap.Pop(&m.h)
		}
		if m.last != nil && bytes.Equal(l, m.last) {
			continue
		}
		m.last = l
		return l, nil
	}
	return nil, io.EOF
}

// Close closes the runs' files.
func (m *Merger) Close() {
	for _, f := range m.files {
		_ = f.Close()
	}
	m.files, m.h = nil, nil
}

// source is one sorted run: a file or the run in memory.
type source struct {
	r    *bufio.Reader
	mem  [][]byte
	line []byte
}

// advance reads the run's next line; false at its end. A line read from a
// file is a new slice, so that the merger's last line stays valid.
func (s *source) advance() (bool, error) {
	if s.r == nil {
		if len(s.mem) == 0 {
			return false, nil
		}
		s.line, s.mem = s.mem[0], s.mem[1:]
		return true, nil
	}
	l, err := s.r.ReadBytes('\n')
	if err == io.EOF && len(l) == 0 {
		return false, nil
	}
	if err != nil && err != io.EOF {
		return false, fmt.Errorf("read index run: %w", err)
	}
	s.line = l
	return true, nil
}

type sourceHeap []*source

func (h sourceHeap) Len() int           { return len(h) }
func (h sourceHeap) Less(i, j int) bool { return bytes.Compare(h[i].line, h[j].line) < 0 }
func (h sourceHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *sourceHeap) Push(x any)        { *h = append(*h, x.(*source)) }
func (h *sourceHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}
