package grid

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// binDir holds the service binaries the tests run as processes, built once
// per test binary run: building and linking them for every cluster cost the
// package minutes on two cores. TestMain removes it.
var binDir struct {
	once sync.Once
	dir  string
	err  error
	out  []byte
}

// TestMain removes the binaries built for the tests after they ran.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir.dir != "" {
		os.RemoveAll(binDir.dir)
	}
	os.Exit(code)
}

// builtBinaries returns the directory of the grid, mcp, loader and crawler
// binaries, building them on the first call.
func builtBinaries(t *testing.T) string {
	t.Helper()
	binDir.once.Do(func() {
		binDir.dir, binDir.err = os.MkdirTemp("", "gridcrawl-test-bin-")
		if binDir.err != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir.dir+string(filepath.Separator),
			"github.com/gridcrawl/gridcrawl/services/grid", "github.com/gridcrawl/gridcrawl/services/mcp",
			"github.com/gridcrawl/gridcrawl/services/loader", "github.com/gridcrawl/gridcrawl/services/crawler")
		binDir.out, binDir.err = cmd.CombinedOutput()
	})
	if binDir.err != nil {
		t.Fatalf("go build services: %v\n%s", binDir.err, binDir.out)
	}
	return binDir.dir
}
