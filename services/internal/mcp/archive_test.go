package mcp

import "testing"

func TestByteRange(t *testing.T) {
	for _, tc := range []struct {
		name, header         string
		size                 int64
		offset, length       int64
		partial, satisfiable bool
	}{
		{"no header", "", 100, 0, 100, false, true},
		{"unknown size", "bytes=0-9", -1, 0, -1, false, true},
		{"first ten", "bytes=0-9", 100, 0, 10, true, true},
		{"open end", "bytes=90-", 100, 90, 10, true, true},
		{"end past the size", "bytes=90-1000", 100, 90, 10, true, true},
		{"suffix", "bytes=-5", 100, 95, 5, true, true},
		{"suffix longer than the object", "bytes=-500", 100, 0, 100, true, true},
		{"start past the end", "bytes=100-", 100, 0, 0, false, false},
		{"several ranges: ignored", "bytes=0-1,5-6", 100, 0, 100, false, true},
		{"other unit: ignored", "items=0-1", 100, 0, 100, false, true},
		{"end before start: ignored", "bytes=9-3", 100, 0, 100, false, true},
		{"garbage: ignored", "bytes=x-y", 100, 0, 100, false, true},
	} {
		off, n, partial, ok := byteRange(tc.header, tc.size)
		if off != tc.offset || n != tc.length || partial != tc.partial || ok != tc.satisfiable {
			t.Errorf("%s: byteRange(%q, %d) = %d, %d, %v, %v; want %d, %d, %v, %v", tc.name, tc.header, tc.size,
				off, n, partial, ok, tc.offset, tc.length, tc.partial, tc.satisfiable)
		}
	}
}

func TestSegmentKey(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"gridcrawl-20261123195000123-00001-l1-abc.warc.gz", "warc/2026/11/23/gridcrawl-20261123195000123-00001-l1-abc.warc.gz"},
		{"gridcrawl-20261123195000123-00001-l1-abc.warc", "warc/2026/11/23/gridcrawl-20261123195000123-00001-l1-abc.warc"},
		{"gridcrawl-20261123195000123-00001-l1-abc.warc.gz.cdxj", "warc/2026/11/23/gridcrawl-20261123195000123-00001-l1-abc.warc.gz"},
		{"gridcrawl-2026112x195000123-00001.warc.gz", ""},
		{"../gridcrawl-20261123195000123.warc.gz", ""},
		{"gridcrawl-20261123195000123.txt", ""},
		{"other-20261123195000123.warc.gz", ""},
		{"gridcrawl-2026.warc", ""},
	} {
		if got := segmentKey(tc.name); got != tc.want {
			t.Errorf("segmentKey(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPartName(t *testing.T) {
	for _, tc := range []struct{ name, label, want string }{
		{"gridcrawl-20261123195000123-00001-l1-abc.warc.gz", "20261123-crawl1", "gridcrawl-20261123195000123-00001-l1-abc_20261123-crawl1.warc.gz"},
		{"gridcrawl-20261123195000123-00001-l1-abc.warc", "c", "gridcrawl-20261123195000123-00001-l1-abc_c.warc"},
		{"gridcrawl-20261123195000123-00001-l1-abc.warc.gz", `my coll/"x"_y`, "gridcrawl-20261123195000123-00001-l1-abc_my-coll--x--y.warc.gz"},
	} {
		got := partName(tc.name, tc.label)
		if got != tc.want {
			t.Errorf("partName(%q, %q) = %q, want %q", tc.name, tc.label, got, tc.want)
		}
		if back := wholeName(got, tc.label); back != tc.name {
			t.Errorf("wholeName(%q, %q) = %q, want %q", got, tc.label, back, tc.name)
		}
		if same := wholeName(tc.name, tc.label); same != tc.name {
			t.Errorf("wholeName(%q, %q) = %q, want it unchanged", tc.name, tc.label, same)
		}
	}
}
