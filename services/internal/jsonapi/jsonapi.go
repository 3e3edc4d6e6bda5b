// Package jsonapi writes the JSON answers of gridcrawl's HTTP surfaces (the
// API, the YaCy and HCF surfaces): one encoding, and one error body
// (contracts.ErrorResponse) that names the offending field.
package jsonapi

import (
	"encoding/json"
	"net/http"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// Write answers with code and v encoded as JSON.
func Write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Error answers with code and an error body; field names the request field
// at fault, or is empty.
func Error(w http.ResponseWriter, code int, msg, field string) {
	Write(w, code, contracts.ErrorResponse{Error: msg, Field: field})
}
