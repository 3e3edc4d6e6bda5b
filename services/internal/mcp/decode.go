package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// decodeBody reads a JSON request body of at most limit bytes into a T,
// strictly: an unknown field is an error, and so is anything after the
// value. Every error is a *contracts.FieldError that names the field as a
// JSON path ("politeness.min_delay_ms", "budget.overrides[0].domain") and
// says what the field must be in JSON's words (a string, an integer, an
// array of strings), never in Go's; an error about the body as a whole has
// no field and says "request body". A number written with a fraction or an
// exponent whose value is whole (1e6, 20.0) is taken for an integer field.
func decodeBody[T any](r io.Reader, limit int64) (T, error) {
	var v T
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return v, &contracts.FieldError{Reason: fmt.Sprintf("could not read the request body: %v", err)}
	}
	if int64(len(data)) > limit {
		return v, &contracts.FieldError{Reason: fmt.Sprintf("request body is larger than %s", byteSize(limit))}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return v, &contracts.FieldError{Reason: "request body is empty: send a JSON object"}
	}
	v, err = decodeStrict[T](data)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && isInteger(te.Type) {
		// encoding/json takes only integers written as such for an integer
		// field: write the whole numbers of the body so and decode again.
		if n, ok := strings.CutPrefix(te.Value, "number "); ok && fits(te.Type, wholeNumber(n)) {
			if whole, ok := wholeNumbers(data); ok {
				var v2 T
				if v2, err = decodeStrict[T](whole); err == nil {
					return v2, nil
				}
				data = whole
			}
		}
	}
	if err != nil {
		return v, bodyError(reflect.TypeFor[T](), data, err)
	}
	return v, nil
}

// decodeStrict decodes data into a T, refusing unknown fields and data
// after the value (which it reports as a *contracts.FieldError).
func decodeStrict[T any](data []byte) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return v, &contracts.FieldError{Reason: "request body has data after its JSON value"}
	}
	return v, nil
}

// isInteger reports whether t (or what it points to) is an integer type.
func isInteger(t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// fits reports whether the integer text w is one of integer type t's values.
func fits(t reflect.Type, w string) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if w == "" {
		return false
	}
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
		_, err := strconv.ParseUint(w, 10, t.Bits())
		return err == nil
	}
	_, err := strconv.ParseInt(w, 10, t.Bits())
	return err == nil
}

// maxWholeDigits bounds the integers wholeNumber writes out: no integer
// field takes more digits, and 1e999999 must not become a million zeros.
const maxWholeDigits = 40

// wholeNumber returns the JSON number n written as an integer ("1e6" →
// "1000000", "-20.0" → "-20", "0.0" → "0") when its value is whole and has
// at most maxWholeDigits digits, else "". It works on the decimal text, so
// that no precision is lost on the way.
func wholeNumber(n string) string {
	sign := ""
	if rest, ok := strings.CutPrefix(n, "-"); ok {
		sign, n = "-", rest
	}
	mant, exp := n, 0
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
		if err != nil {
			return ""
		}
		mant, exp = n[:i], e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	switch {
	case digits == "" || strings.Trim(digits, "0123456789") != "":
		return ""
	case strings.Trim(digits, "0") == "":
		return "0" // 0e70 is 0, whatever the exponent
	case exp > maxWholeDigits || exp < -len(n)-maxWholeDigits:
		return ""
	}
	point := len(intPart) + exp // digits[:point] is the integer part
	var whole string
	switch {
	case point <= 0:
		if strings.Trim(digits, "0") != "" {
			return ""
		}
		whole = "0"
	case point >= len(digits):
		whole = digits + strings.Repeat("0", point-len(digits))
	default:
		if strings.Trim(digits[point:], "0") != "" {
			return ""
		}
		whole = digits[:point]
	}
	whole = strings.TrimLeft(whole, "0")
	if whole == "" {
		return "0"
	}
	if len(whole) > maxWholeDigits {
		return ""
	}
	return sign + whole
}

// wholeNumbers rewrites the numbers of the JSON document data that have a
// fraction or an exponent and a whole value as integers; false when data
// does not decode or has no such number.
func wholeNumbers(data []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, false
	}
	changed := false
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case json.Number:
			if strings.ContainsAny(string(v), ".eE") {
				if w := wholeNumber(string(v)); w != "" {
					changed = true
					return json.Number(w)
				}
			}
		case []any:
			for i, e := range v {
				v[i] = walk(e)
			}
		case map[string]any:
			for k, e := range v {
				v[k] = walk(e)
			}
		}
		return v
	}
	doc = walk(doc)
	if !changed {
		return nil, false
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, false
	}
	return b.Bytes(), true
}

// integerReason explains why the JSON number n does not fit an integer
// field of type t: too large or too small for it (with its bound), or not
// whole.
func integerReason(t reflect.Type, n string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if wholeNumber(n) == "" {
		// Not whole, or whole with more digits than any integer takes.
		f, _ := strconv.ParseFloat(n, 64) // ±Inf when too large for a float
		if math.Abs(f) < math.Exp2(float64(t.Bits()-1)) {
			return fmt.Sprintf("must be a whole number, not %s", n)
		}
	}
	unsigned := t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64
	bits := t.Bits()
	switch {
	case strings.HasPrefix(n, "-") && unsigned:
		return fmt.Sprintf("%s is out of range: at least 0", n)
	case strings.HasPrefix(n, "-"):
		return fmt.Sprintf("%s is out of range: at least %d", n, int64(-1)<<(bits-1))
	case unsigned:
		return fmt.Sprintf("%s is out of range: at most %d", n, uint64(1)<<bits-1)
	}
	return fmt.Sprintf("%s is out of range: at most %d", n, int64(1)<<(bits-1)-1)
}

// bodyError explains a decoding error of data into a value of type t.
func bodyError(t reflect.Type, data []byte, err error) *contracts.FieldError {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		if te.Field == "" {
			want := jsonKind(t)
			if want == "an object" {
				want = "a JSON object"
			}
			return &contracts.FieldError{Reason: fmt.Sprintf("request body must be %s, not %s", want, valueWord(te.Value))}
		}
		// encoding/json names arrays without the index of their element:
		// find the element in the body.
		field := te.Field
		if doc, ok := firstValue(data); ok {
			kind, _, _ := strings.Cut(te.Value, " ")
			if at, ok := locate(doc, strings.Split(te.Field, "."), kind, ""); ok {
				field = at
			}
		}
		if n, ok := strings.CutPrefix(te.Value, "number "); ok && isInteger(te.Type) {
			return &contracts.FieldError{Field: field, Reason: integerReason(te.Type, n)}
		}
		return &contracts.FieldError{Field: field, Reason: fmt.Sprintf("must be %s, not %s", jsonKind(te.Type), valueWord(te.Value))}
	case errors.As(err, &se):
		line, col := position(data, se.Offset-1) // Offset is after the bad byte
		msg := strings.TrimPrefix(se.Error(), "json: ")
		return &contracts.FieldError{Reason: fmt.Sprintf("request body is not valid JSON: %s at line %d, column %d", msg, line, col)}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &contracts.FieldError{Reason: "request body ends in the middle of its JSON value"}
	case strings.Contains(err.Error(), "json: unknown field "):
		if doc, ok := firstValue(data); ok {
			if path, known, ok := unknownField(t, doc, ""); ok {
				return &contracts.FieldError{Field: path, Reason: "unknown field; known fields here are " + strings.Join(known, ", ")}
			}
		}
		_, name, _ := strings.Cut(err.Error(), "json: unknown field ")
		if unq, err := strconv.Unquote(name); err == nil {
			name = unq
		}
		return &contracts.FieldError{Field: joinPath("", name), Reason: "unknown field"}
	}
	return &contracts.FieldError{Reason: "request body is not valid: " + strings.TrimPrefix(err.Error(), "json: ")}
}

// firstValue decodes the first JSON value of data, ignoring what follows
// (decodeBody reports that separately).
func firstValue(data []byte) (any, bool) {
	var v any
	err := json.NewDecoder(bytes.NewReader(data)).Decode(&v)
	return v, err == nil
}

// valueWord turns the Value of a json.UnmarshalTypeError ("string",
// "number", "number -1", "bool", "array", "object") into words.
func valueWord(v string) string {
	if n, ok := strings.CutPrefix(v, "number "); ok {
		return n
	}
	switch v {
	case "bool":
		return "true or false"
	case "array", "object":
		return "an " + v
	}
	return "a " + v
}

// locate returns the JSON path, with array indexes, of the first value of
// JSON type kind (the Value of a json.UnmarshalTypeError: "string",
// "number", "bool", "array", "object") at the dotted field path segs of
// node. Inside an array it looks at the elements before the array itself.
func locate(node any, segs []string, kind, at string) (string, bool) {
	if arr, ok := node.([]any); ok {
		for i, e := range arr {
			if p, ok := locate(e, segs, kind, fmt.Sprintf("%s[%d]", at, i)); ok {
				return p, true
			}
		}
	}
	if len(segs) == 0 {
		return at, jsonType(node) == kind
	}
	obj, ok := node.(map[string]any)
	if !ok {
		return "", false
	}
	v, ok := obj[segs[0]]
	if !ok {
		for k, kv := range obj {
			if strings.EqualFold(k, segs[0]) {
				v, ok = kv, true
				break
			}
		}
	}
	if !ok {
		return "", false
	}
	if at != "" {
		at += "."
	}
	return locate(v, segs[1:], kind, at+segs[0])
}

// plainName is a field name that a JSON path can write after a dot.
var plainName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// joinPath appends the name of an object member to a JSON path: after a dot
// when it is a plain name ("politeness.min_delay_ms"), else quoted in
// brackets (politeness[""], ["a.b"]), so that the path is never empty.
func joinPath(at, name string) string {
	switch {
	case plainName.MatchString(name) && at == "":
		return name
	case plainName.MatchString(name):
		return at + "." + name
	}
	return at + "[" + strconv.Quote(name) + "]"
}

// jsonType names the JSON type of a decoded value as encoding/json's
// UnmarshalTypeError does.
func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

// jsonKind names what a value of Go type t is in JSON, with an article: "a
// string", "an integer", "an array of strings".
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return "an RFC 3339 date-time string"
	case t == reflect.TypeFor[json.RawMessage]():
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		elem := jsonKind(t.Elem())
		switch {
		case elem == "true or false":
			return "an array of true or false"
		case strings.HasPrefix(elem, "an array"):
			return "an array of arrays"
		}
		_, noun, _ := strings.Cut(elem, " ")
		return "an array of " + noun + "s"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a JSON value"
}

// jsonFields maps the JSON names of struct type t's fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// lookupField finds a field by JSON name, preferring an exact match and
// else ignoring case, as encoding/json does.
func lookupField(fields map[string]reflect.Type, name string) (reflect.Type, bool) {
	if ft, ok := fields[name]; ok {
		return ft, true
	}
	for n, ft := range fields {
		if strings.EqualFold(n, name) {
			return ft, true
		}
	}
	return nil, false
}

// unknownField finds the first key of the decoded JSON v (keys in sorted
// order) that type t has no field for, and returns its JSON path and the
// field names t has at that place.
func unknownField(t reflect.Type, v any, at string) (string, []string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return "", nil, false
		}
		fields := jsonFields(t)
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			path := joinPath(at, k)
			ft, ok := lookupField(fields, k)
			if !ok {
				return path, slices.Sorted(maps.Keys(fields)), true
			}
			if p, known, ok := unknownField(ft, obj[k], path); ok {
				return p, known, true
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			return "", nil, false
		}
		for i, e := range arr {
			if p, known, ok := unknownField(t.Elem(), e, fmt.Sprintf("%s[%d]", at, i)); ok {
				return p, known, true
			}
		}
	}
	return "", nil, false
}

// position turns a byte offset of data into a line and a column, from 1.
func position(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = len(before) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// byteSize writes a limit for humans: "4 MiB", "512 KiB" or "100 bytes".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
