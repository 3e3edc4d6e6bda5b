package mcp

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// TestURLRecrawlMirrorsIndex: the crawl log's recrawl state is the index's,
// field for field: a txindex.Recrawl with every field set reads the same
// in the API's JSON as in the index's own, so a field added to the index
// and not to the API body fails here.
func TestURLRecrawlMirrorsIndex(t *testing.T) {
	var rc txindex.Recrawl
	v := reflect.ValueOf(&rc).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Struct:
			if f.Type() != reflect.TypeFor[time.Time]() {
				t.Fatalf("txindex.Recrawl.%s: a %v this test cannot fill", v.Type().Field(i).Name, f.Type())
			}
			f.Set(reflect.ValueOf(time.Date(2026, 1, i+1, 0, 0, 0, 0, time.UTC)))
		default:
			t.Fatalf("txindex.Recrawl.%s: a %v this test cannot fill", v.Type().Field(i).Name, f.Type())
		}
	}
	want, err := json.Marshal(rc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(urlRecrawl(&rc))
	if err != nil {
		t.Fatal(err)
	}
	var w, g map[string]any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("the API's recrawl state differs from the index's (-index +api):\n%s", diff)
	}
	if urlRecrawl(nil) != nil {
		t.Errorf("urlRecrawl(nil) is not nil: a one-shot crawl's URL would show a recrawl state")
	}
}

// TestURLRecordRender: the API's URL record says why the loader rendered
// the page in a headless browser, and null when it did not.
func TestURLRecordRender(t *testing.T) {
	for _, tc := range []struct {
		name   string
		render string
		want   any
	}{
		{"rendered", "auto: scripts and 12 characters of text", "auto: scripts and 12 characters of text"},
		{"plain HTTP", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := txindex.Record{Key: "k", CrawlID: "c", URL: "http://a.test/", Host: "a.test", HTTPStatus: 200, Render: tc.render}
			b, err := json.Marshal(urlRecord(r))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if v, ok := got["render"]; !ok || v != tc.want {
				t.Errorf("urlRecord(Render %q) has render %v (present %v), want %v", tc.render, v, ok, tc.want)
			}
		})
	}
}
