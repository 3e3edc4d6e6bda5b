package grid

import (
	"net/http"
	"os"

	"github.com/gridcrawl/gridcrawl/services/internal/apiclient"
	"github.com/gridcrawl/gridcrawl/services/internal/diskspace"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// gridAPI is the MCP API a command reads: a running grid's, or, when none
// runs, the API of an MCP opened on the data directory and served in this
// process. Either way the command reads it through the same client, and
// the API computes every answer.
type gridAPI struct {
	*apiclient.Client
	// offline: no grid runs; the API is served in this process.
	offline bool
	close   func()
}

// inProcessBase is the base URL of the API served in process: a Host that
// MCP answers to on loopback (its guard refuses others with 421).
const inProcessBase = "http://localhost"

// openAPI returns the API of the MCP at api (or GRIDCRAWL_API_URL), of the
// grid running on the data directory data, or, when none runs there, of an
// MCP opened on that directory. Its close releases the directory.
func openAPI(api, data string) (*gridAPI, error) {
	cfg, err := loadConfig(data)
	if err != nil {
		return nil, err
	}
	if base := apiFor(api, cfg.Backends.DataDir); base != "" {
		return &gridAPI{Client: apiclient.New(base, os.Getenv("GRIDCRAWL_API_TOKEN"), nil), close: func() {}}, nil
	}
	g, err := offline(cfg.Backends.DataDir)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: apiclient.InProcess(g.MCP.Handler())}
	return &gridAPI{Client: apiclient.New(inProcessBase, cfg.MCP.Token, hc), offline: true,
		close: func() { _ = g.Backends.Close() }}, nil
}

// readinessLines says what of rd a user should know: which backends a
// running grid waits for, or, when the data directory is read with no grid
// running, what fails there (such as a full disk).
func (a *gridAPI) readinessLines(rd metrics.Readiness) []string {
	if !a.offline {
		if line := waitingLine(rd); line != "" {
			return []string{line}
		}
		return nil
	}
	var lines []string
	for _, b := range rd.Failing {
		msg := rd.Backends[b]
		if b != diskspace.Backend { // the disk's error names the data directory
			msg = b + ": " + msg
		}
		lines = append(lines, msg)
	}
	return lines
}
