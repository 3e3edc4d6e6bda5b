package mcp

import (
	"net/http"

	"github.com/gridcrawl/gridcrawl/services/internal/jsonapi"
)

// timeline serves GET /api/v1/crawls/{id}/timeline.
func (m *MCP) timeline(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !m.knownCrawl(w, r, id) {
		return
	}
	tl, err := m.crawls.Timeline(r.Context(), id)
	if err != nil {
		m.log.Error("timeline", "crawl_id", id, "err", err)
		jsonapi.Error(w, http.StatusInternalServerError, "could not read the timeline", "")
		return
	}
	jsonapi.Write(w, http.StatusOK, tl)
}
