package warc

import (
	"fmt"
	"io"
	"slices"
	"sort"
)

// Range is the bytes [Offset, Offset+Length) of a file.
type Range struct{ Offset, Length int64 }

// End is the offset just past r.
func (r Range) End() int64 { return r.Offset + r.Length }

// Selection is a part of a WARC file: the byte ranges of the records it
// holds, in file order. The selected file is those bytes one range after
// another: the file's records, byte for byte, at other offsets. A record of
// a .warc.gz file is a gzip member of its own, so the selected file of a
// .warc.gz file is a .warc.gz file too, and nothing is recompressed.
type Selection struct {
	ranges []Range // sorted, disjoint, none adjacent to the next
	at     []int64 // where ranges[i] starts in the selected file
	size   int64
}

// NewSelection returns the selection of ranges, given in any order:
// overlapping and adjacent ranges merge, empty ones are dropped.
func NewSelection(ranges []Range) *Selection {
	rs := slices.DeleteFunc(slices.Clone(ranges), func(r Range) bool { return r.Length <= 0 })
	slices.SortFunc(rs, func(a, b Range) int {
		switch {
		case a.Offset < b.Offset:
			return -1
		case a.Offset > b.Offset:
			return 1
		}
		return 0
	})
	s := &Selection{}
	for _, r := range rs {
		if n := len(s.ranges); n > 0 && r.Offset <= s.ranges[n-1].End() {
			last := &s.ranges[n-1]
			if end := r.End(); end > last.End() {
				s.size += end - last.End()
				last.Length = end - last.Offset
			}
			continue
		}
		s.ranges = append(s.ranges, r)
		s.at = append(s.at, s.size)
		s.size += r.Length
	}
	return s
}

// Size is the selected file's size in bytes.
func (s *Selection) Size() int64 { return s.size }

// Ranges returns the selection's ranges of the file, in order.
func (s *Selection) Ranges() []Range { return slices.Clone(s.ranges) }

// Map returns where the byte at offset of the file lies in the selected
// file, and false when the selection does not hold it.
func (s *Selection) Map(offset int64) (int64, bool) {
	i := sort.Search(len(s.ranges), func(i int) bool { return s.ranges[i].End() > offset })
	if i == len(s.ranges) || offset < s.ranges[i].Offset {
		return 0, false
	}
	return s.at[i] + offset - s.ranges[i].Offset, true
}

// Part returns the ranges of the file that hold the bytes [offset,
// offset+length) of the selected file, in order; length < 0 reads to the
// end, and a part past the end is cut at the end.
func (s *Selection) Part(offset, length int64) []Range {
	end := s.size
	if length >= 0 && offset+length < end {
		end = offset + length
	}
	var out []Range
	i := sort.Search(len(s.at), func(i int) bool { return s.at[i]+s.ranges[i].Length > offset })
	for ; i < len(s.ranges) && s.at[i] < end; i++ {
		from := max(offset, s.at[i])
		to := min(end, s.at[i]+s.ranges[i].Length)
		out = append(out, Range{Offset: s.ranges[i].Offset + from - s.at[i], Length: to - from})
	}
	return out
}

// SelectRecords reads the records of a WARC file in order (as a Scanner
// does: a compressed file holds one record per gzip member) and returns the
// ranges of those that a crawl's part of the file holds:
//
//   - the indexed records (response, revisit, resource) that member
//     selects by offset, each with the request record just before it that
//     it is concurrent to (WARC-Concurrent-To), as a loader writes an
//     exchange;
//   - the other records that refer to a held record (WARC-Refers-To) or
//     are concurrent to one: a rendered page's DOM (a conversion record)
//     and the metadata record about it;
//   - the indexed records that alone selects, by themselves (the
//     original of a revisit, kept for its payload);
//   - every warcinfo record (one heads each file a loader writes).
//
// others, when not nil, gives the member length, by offset, of indexed
// records that member does not select (other crawls' records, as the
// file's index lists them): those are passed over without being inflated
// (see Scanner.Skip), so that a crawl's part of a segment mostly holding
// other crawls' records costs little more than its own bytes.
//
// Memory is one record's block (up to maxBlock) and the ids of the held
// records.
func SelectRecords(r io.Reader, maxBlock int64, member, alone func(offset int64) bool, others func(offset int64) (int64, bool)) ([]Range, error) {
	sc := NewScanner(r, maxBlock)
	if others != nil {
		sc.Skip(others)
	}
	held := map[string]bool{}
	var out []Range
	var pending *Scanned // a request whose response has not come yet
	for {
		s, err := sc.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("select records: %w", err)
		}
		if s.Header == nil {
			// Another crawl's indexed record, passed over.
			if alone != nil && alone(s.Offset) {
				out = append(out, Range{s.Offset, s.Length})
			}
			pending = nil
			continue
		}
		keep := false
		typ := s.Header.Get(FieldType)
		switch typ {
		case TypeWarcinfo:
			keep = true
		case TypeRequest:
			s.Block = nil
			pending = &s // decided by the record it comes before
			continue
		case TypeResponse, TypeRevisit, TypeResource:
			keep = member(s.Offset)
			if p := pending; p != nil && keep && RecordID(p.Record) == s.Header.Get(FieldConcurrentTo) {
				held[RecordID(p.Record)] = true
				out = append(out, Range{p.Offset, p.Length})
			}
			if !keep && alone != nil && alone(s.Offset) {
				out = append(out, Range{s.Offset, s.Length})
			}
		default: // conversion, metadata: held when what they refer to is
			keep = held[s.Header.Get(FieldRefersTo)] || held[s.Header.Get(FieldConcurrentTo)]
		}
		pending = nil
		if keep {
			held[RecordID(s.Record)] = true
			out = append(out, Range{s.Offset, s.Length})
		}
	}
}
