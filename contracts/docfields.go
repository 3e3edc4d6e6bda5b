package contracts

import (
	"reflect"
	"strings"
	"sync"
)

// FieldType is the index type of a Document field, given by its name's
// suffix in YaCy's convention.
type FieldType string

// The field types of Document.
const (
	FieldKeyword FieldType = "keyword" // _s, _sxt: exact strings
	FieldText    FieldType = "text"    // _t, _txt: analyzed text
	FieldInteger FieldType = "integer" // _i
	FieldLong    FieldType = "long"    // _l
	FieldDate    FieldType = "date"    // _dt
	FieldBoolean FieldType = "boolean" // _b
)

// DocumentField describes one JSON field of Document.
type DocumentField struct {
	Name string
	Type FieldType
	// Multi marks YaCy's multi-valued fields (JSON arrays).
	Multi bool
}

// suffixTypes maps YaCy's name suffixes to field types, longest first.
var suffixTypes = []struct {
	suffix string
	typ    FieldType
}{
	{"_sxt", FieldKeyword}, {"_txt", FieldText}, {"_dt", FieldDate},
	{"_s", FieldKeyword}, {"_t", FieldText}, {"_i", FieldInteger}, {"_l", FieldLong}, {"_b", FieldBoolean},
}

// unsuffixed are the types of YaCy's fields whose names have no suffix.
var unsuffixed = map[string]FieldType{
	"id": FieldKeyword, "title": FieldText, "content_type": FieldKeyword,
	"keywords": FieldText, "author": FieldText, "last_modified": FieldDate,
}

var docFields = sync.OnceValue(func() []DocumentField {
	t := reflect.TypeFor[Document]()
	out := make([]DocumentField, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		typ, ok := unsuffixed[name]
		for _, s := range suffixTypes {
			if !ok && strings.HasSuffix(name, s.suffix) {
				typ, ok = s.typ, true
			}
		}
		if !ok {
			panic("contracts: document field " + name + " has no type")
		}
		out = append(out, DocumentField{Name: name, Type: typ, Multi: f.Type.Kind() == reflect.Slice})
	}
	return out
})

// DocumentFields returns the fields of Document in declaration order, the
// single description from which the search indices' mappings are made.
func DocumentFields() []DocumentField { return docFields() }
