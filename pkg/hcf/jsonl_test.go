package hcf

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

var cmpRaw = cmp.Comparer(func(a, b json.RawMessage) bool { return string(a) == string(b) })

func TestParseRequests(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Request
		err      string
	}{
		{"documented example", "{\"fp\":\"/\"}\n{\"fp\":\"page1.html\", \"p\": 1, \"qdata\": {\"depth\": 1}}",
			[]Request{{FP: "/"}, {FP: "page1.html", P: 1, QData: json.RawMessage(`{"depth":1}`)}}, ""},
		{"blank lines and CRLF", "\n{\"fp\":\"a\"}\r\n  \r\n{\"fp\":\"b\",\"fdata\":[1, 2]}\n\n",
			[]Request{{FP: "a"}, {FP: "b", FData: json.RawMessage(`[1,2]`)}}, ""},
		{"nulls", `{"fp":"a","qdata":null,"fdata":null,"p":null}`, []Request{{FP: "a"}}, ""},
		{"integral floats", `{"fp":"a","p":2.0}` + "\n" + `{"fp":"b","p":1e2}`, []Request{{FP: "a", P: 2}, {FP: "b", P: 100}}, ""},
		{"unknown keys ignored", `{"fp":"a","x":1}`, []Request{{FP: "a"}}, ""},
		{"escapes kept", `{"fp":"\u00e9\n","qdata":"\u00e9 \n"}`, []Request{{FP: "é\n", QData: json.RawMessage(`"\u00e9 \n"`)}}, ""},
		{"empty", "", nil, ""},
		{"missing fp", `{"qdata":1}`, nil, "line 1: fp is missing"},
		{"fp not a string", "\n" + `{"fp":["a"]}`, nil, "line 2: fp must be a string"},
		{"fp empty", `{"fp":""}`, nil, "line 1: fp is empty"},
		{"fp too long", `{"fp":"` + strings.Repeat("é", MaxFPBytes/2+1) + `"}`, nil, "line 1: fp is longer than 8191 bytes"},
		{"p string", `{"fp":"a","p":"1"}`, nil, "line 1: p must be a number"},
		{"p bool", `{"fp":"a","p":true}`, nil, "line 1: p must be a number"},
		{"surrogate pair", `{"fp":"\ud83d\ude00"}`, []Request{{FP: "\U0001F600"}}, ""},
		{"escaped backslash before u", `{"fp":"\\ud800"}`, []Request{{FP: `\ud800`}}, ""},
		{"lone high surrogate", `{"fp":"a"}` + "\n" + `{"fp":"\ud800"}`, nil, "line 2: fp holds an unpaired surrogate escape"},
		{"lone low surrogate", `{"fp":"x\uDC00y"}`, nil, "line 1: fp holds an unpaired surrogate escape"},
		{"high surrogate then a letter", `{"fp":"\ud800a"}`, nil, "line 1: fp holds an unpaired surrogate escape"},
		{"two high surrogates", `{"fp":"\ud800\ud800"}`, nil, "line 1: fp holds an unpaired surrogate escape"},
		{"invalid utf-8", "{\"fp\":\"a\xffb\"}", nil, "line 1: fp is not valid UTF-8"},
		{"p negative", `{"fp":"a","p":-1}`, nil, "line 1: p must be between 0 and 255"},
		{"p huge", `{"fp":"a","p":1e400}`, nil, "line 1: p must be an integer"},
		{"p fraction", `{"fp":"a","p":0.5}`, nil, "line 1: p must be an integer"},
		{"array", `["a"]`, nil, "line 1: want a JSON object"},
		{"trailing garbage", `{"fp":"a"} x`, nil, "line 1: invalid JSON at byte 12: invalid character 'x' after top-level value"},
		{"second object", `{"fp":"a"}{"fp":"b"}`, nil, "line 1: invalid JSON at byte 11: invalid character '{' after top-level value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRequests(strings.NewReader(tc.in), Limits{})
			if tc.err != "" {
				var le *LineError
				if !errors.As(err, &le) || err.Error() != tc.err {
					t.Fatalf("ParseRequests(%q) error = %v, want LineError %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRequests(%q) error: %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got, cmpRaw); diff != "" {
				t.Errorf("ParseRequests(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	lim := Limits{MaxLineBytes: 20, MaxLines: 3}
	for _, tc := range []struct{ name, in, err string }{
		{"line at the limit", "{\"fp\":\"" + strings.Repeat("a", 11) + "\"}\n", ""},
		{"line over the limit", "{\"fp\":\"a\"}\n{\"fp\":\"" + strings.Repeat("a", 12) + "\"}\n", "line 2: longer than 20 bytes"},
		{"last line over the limit", "{\"fp\":\"" + strings.Repeat("a", 40) + "\"}", "line 1: longer than 20 bytes"},
		{"lines at the limit", "{\"fp\":\"a\"}\n\n{\"fp\":\"b\"}\n", ""},
		{"too many lines", "{\"fp\":\"a\"}\n\n\n{\"fp\":\"b\"}\n", "line 4: more than 3 lines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRequests(strings.NewReader(tc.in), lim)
			if got := errString(err); got != tc.err {
				t.Errorf("ParseRequests(%q) error = %q, want %q", tc.in, got, tc.err)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestParseReadError(t *testing.T) {
	boom := errors.New("boom")
	// The reader fails in the middle of the second line: the error is the
	// reader's, not the truncated line's.
	r := io.MultiReader(strings.NewReader("{\"fp\":\"a\"}\n{\"fp\":"), iotest.ErrReader(boom))
	_, err := ParseRequests(r, Limits{})
	var le *LineError
	if !errors.Is(err, boom) || errors.As(err, &le) {
		t.Errorf("ParseRequests(failing reader) error = %v, want %v and no LineError", err, boom)
	}
	r = io.MultiReader(strings.NewReader("\"00013967d8af7b0001\"\n\"0001"), iotest.ErrReader(boom))
	if _, err := ParseIDs(r, Limits{}); !errors.Is(err, boom) {
		t.Errorf("ParseIDs(failing reader) error = %v, want %v", err, boom)
	}
}

func TestParseIDs(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
		err      string
	}{
		{"seed", `"00013967d8af7b0001"`, []string{"00013967d8af7b0001"}, ""},
		{"mixed lines", "[\"a\", \"b\"]\n\n\"c\"\r\n[]\n", []string{"a", "b", "c"}, ""},
		{"object", `{"id":"a"}`, nil, "line 1: want a batch id string or an array of them"},
		{"number", "\"a\"\n1", nil, "line 2: want a batch id string or an array of them"},
		{"nested array", `["a",["b"]]`, nil, "line 1: element 1 is not a string"},
		{"null element", `[null]`, nil, "line 1: element 0 is not a string"},
		{"broken array", `["a"`, nil, "line 1: invalid JSON array: unexpected end of JSON input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseIDs(strings.NewReader(tc.in), Limits{})
			if got := errString(err); got != tc.err {
				t.Fatalf("ParseIDs(%q) error = %q, want %q", tc.in, got, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseIDs(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestAppendString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/some/path.html", `"/some/path.html"`},
		{"a&b<c>", `"a&b<c>"`},
		{"q\"b\\", `"q\"b\\"`},
		{"\n\r\t\x00\x1f", `"\n\r\t\u0000\u001f"`},
		{"é\u2028\u2029", `"é\u2028\u2029"`},
		{"bad\xffutf8", `"bad\ufffdutf8"`},
	} {
		if got := string(AppendString(nil, tc.in)); got != tc.want {
			t.Errorf("AppendString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestAppendBatchAndFingerprint(t *testing.T) {
	b := Batch{ID: "01013967d8af7e0001", Requests: []Queued{{FP: "page1.html", QData: json.RawMessage(`{"depth":1}`)}, {FP: "/"}}}
	const want = `{"id":"01013967d8af7e0001","requests":[["page1.html",{"depth":1}],["/",null]]}`
	if got := string(AppendBatch(nil, b)); got != want {
		t.Errorf("AppendBatch = %s, want %s", got, want)
	}
	qs, err := DecodeRequests(AppendRequests(nil, b.Requests))
	if err != nil {
		t.Fatalf("DecodeRequests error: %v", err)
	}
	if diff := cmp.Diff(b.Requests, qs, cmpRaw); diff != "" {
		t.Errorf("DecodeRequests(AppendRequests) (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		f    Fingerprint
		want string
	}{
		{Fingerprint{FP: "/"}, `{"fp":"/"}`},
		{Fingerprint{FP: "/", FData: json.RawMessage(`{"a":1}`)}, `{"fp":"/","fdata":{"a":1}}`},
	} {
		if got := string(AppendFingerprint(nil, tc.f)); got != tc.want {
			t.Errorf("AppendFingerprint(%v) = %s, want %s", tc.f, got, tc.want)
		}
	}
}

func TestBatchID(t *testing.T) {
	for _, tc := range []struct {
		p   int
		ms  int64
		seq uint16
		id  string
	}{
		{0, 0x13967d8af7b, 1, "00013967d8af7b0001"},
		{1, 0x13967d8af7e, 1, "01013967d8af7e0001"},
		{255, 1<<48 - 1, 0xffff, "ffffffffffffffffff"},
	} {
		if got := FormatBatchID(tc.p, tc.ms, tc.seq); got != tc.id {
			t.Errorf("FormatBatchID(%d, %x, %d) = %q, want %q", tc.p, tc.ms, tc.seq, got, tc.id)
		}
		p, ms, seq, ok := ParseBatchID(tc.id)
		if !ok || p != tc.p || ms != tc.ms || seq != tc.seq {
			t.Errorf("ParseBatchID(%q) = %d, %x, %d, %v, want %d, %x, %d, true", tc.id, p, ms, seq, ok, tc.p, tc.ms, tc.seq)
		}
	}
	for _, bad := range []string{"", "00013967d8af7b000", "00013967D8AF7B0001", "00013967d8af7b000g", "00013967d8af7b00010"} {
		if _, _, _, ok := ParseBatchID(bad); ok {
			t.Errorf("ParseBatchID(%q) ok, want not ok", bad)
		}
	}
}

func TestIDGen(t *testing.T) {
	now := int64(1000)
	g := NewIDGen(func() time.Time { return time.UnixMilli(now) })
	var got []string
	got = append(got, g.Next(0), g.Next(1)) // same millisecond: sequence 1, 2
	now = 900                               // the clock goes back
	got = append(got, g.Next(0))
	now = 2000
	got = append(got, g.Next(3))
	g.Observe(FormatBatchID(0, 5000, 7))
	got = append(got, g.Next(0))
	want := []string{
		FormatBatchID(0, 1000, 1), FormatBatchID(1, 1000, 2), FormatBatchID(0, 1000, 3),
		FormatBatchID(3, 2000, 1), FormatBatchID(0, 5000, 8),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("IDGen ids (-want +got):\n%s", diff)
	}
	g.Observe(FormatBatchID(0, 6000, 0xffff))
	if got, want := g.Next(0), FormatBatchID(0, 6001, 1); got != want {
		t.Errorf("Next after sequence 0xffff = %q, want %q", got, want)
	}
}

func TestNewBatches(t *testing.T) {
	g := NewIDGen(func() time.Time { return time.UnixMilli(1) })
	var reqs []Request
	for i := range 205 {
		reqs = append(reqs, Request{FP: string(rune('a'+i%26)) + strings.Repeat("x", i/26), P: i % 2})
	}
	bs := NewBatches(g, reqs)
	var sizes []int
	for _, b := range bs {
		sizes = append(sizes, len(b.Requests))
	}
	// 103 of p 0 and 102 of p 1, batches opened in order of need.
	if diff := cmp.Diff([]int{100, 100, 3, 2}, sizes); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
	for i, b := range bs {
		if p, _, _, _ := ParseBatchID(b.ID); p != []int{0, 1, 0, 1}[i] {
			t.Errorf("batch %d priority %d, want %d", i, p, []int{0, 1, 0, 1}[i])
		}
	}
}

// FuzzParseRequests checks that any input parses or fails with a line
// error, and that what parses is valid and survives a round trip.
func FuzzParseRequests(f *testing.F) {
	for _, s := range []string{
		"{\"fp\":\"/\"}\n{\"fp\":\"page1.html\", \"p\": 1, \"qdata\": {\"depth\": 1}}",
		`{"fp":"a","fdata":[1,{"b":null}],"p":255}`,
		`{"fp":"\u00e9\ud800","p":1e2}`,
		`{"fp":1}`, `{"fp":"a","p":"x"}`, `["a"]`, "{\"fp\":\"a\"}\r\n\n{",
		`{"FP":"a","P":3}`, `{"fp":"a","p":-0}`, `{"fp":"a","p":0.0e1}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		reqs, err := ParseRequests(strings.NewReader(in), Limits{MaxLineBytes: 4096, MaxLines: 100})
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Line < 1 {
				t.Fatalf("ParseRequests(%q) error %v is not a line error", in, err)
			}
			return
		}
		var again bytes.Buffer
		for _, r := range reqs {
			if err := r.Validate(); err != nil {
				t.Fatalf("ParseRequests(%q) gave invalid request %+v: %v", in, r, err)
			}
			for _, d := range []json.RawMessage{r.QData, r.FData} {
				if d != nil && (bytes.ContainsAny(d, "\n\r") || string(d) == "null") {
					t.Fatalf("ParseRequests(%q) kept data %q that is not compact", in, d)
				}
			}
			again.WriteString(`{"fp":`)
			again.Write(AppendString(nil, r.FP))
			again.WriteString(`,"p":` + strconv.Itoa(r.P))
			if r.QData != nil {
				again.WriteString(`,"qdata":` + string(r.QData))
			}
			if r.FData != nil {
				again.WriteString(`,"fdata":` + string(r.FData))
			}
			again.WriteString("}\n")
		}
		back, err := ParseRequests(&again, Limits{MaxLineBytes: 1 << 20, MaxLines: 100})
		if err != nil {
			t.Fatalf("re-parse of %q: %v", again.String(), err)
		}
		if diff := cmp.Diff(reqs, back, cmpRaw); diff != "" {
			t.Fatalf("round trip of %q (-first +second):\n%s", in, diff)
		}
	})
}

// FuzzParseIDs checks that any input parses or fails with a line error.
func FuzzParseIDs(f *testing.F) {
	for _, s := range []string{`"00013967d8af7b0001"`, "[\"a\",\"b\"]\n\"c\"", `[1]`, `{"a":1}`, "\"\\u00e9\"\n[]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		ids, err := ParseIDs(strings.NewReader(in), Limits{MaxLineBytes: 4096, MaxLines: 100})
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Line < 1 {
				t.Fatalf("ParseIDs(%q) error %v is not a line error", in, err)
			}
			return
		}
		for _, id := range ids {
			if !utf8.ValidString(id) {
				t.Fatalf("ParseIDs(%q) gave invalid UTF-8 id %q", in, id)
			}
		}
	})
}

// FuzzAppendString checks that AppendString makes JSON that decodes to its
// input, invalid UTF-8 aside.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "/a?b=1&c=<2>", "\x00\u2028\"\\", "\xff\xfe", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := AppendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("AppendString(%q) = %s, not JSON: %v", s, b, err)
		}
		// encoding/json makes each invalid byte U+FFFD, as AppendString must.
		std, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var want string
		if err := json.Unmarshal(std, &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("AppendString(%q) decodes to %q, want %q", s, got, want)
		}
		if bytes.ContainsAny(b, "\n\r") {
			t.Fatalf("AppendString(%q) = %s contains a line break", s, b)
		}
	})
}
