package mcp

import (
	"net/http"

	"github.com/gridcrawl/gridcrawl/contracts/schemas"
)

// openAPIPath is where MCP serves the OpenAPI 3.1 document of its API.
const openAPIPath = "/api/v1/openapi.json"

// serveOpenAPI serves the embedded OpenAPI document as it is in the
// repository (contracts/schemas/openapi.json).
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(schemas.OpenAPI())
}
