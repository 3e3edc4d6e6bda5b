package grid

import (
	"io/fs"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// TestDataDirectoryIsPrivate crawls on embedded backends under the usual
// umask (022) and checks that everything in the data directory — databases
// with their -wal and -shm files, WARC segments, the lock — is readable by
// its owner only.
func TestDataDirectoryIsPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })

	site := websim.NewTestSite()
	if err := site.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	data := filepath.Join(t.TempDir(), "data")
	_, api := startGrid(t, testConfig(t, data, site.Resolve()))
	profile := contracts.Profile{
		StartURLs: []string{site.StartURL()}, MaxDepth: 2, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 5, MaxDelayMS: 50, DelayFactor: 1, Robots: contracts.RobotsObey},
	}
	var created contracts.CreateCrawlResponse
	if code := apiDo(t, http.MethodPost, api+"/api/v1/crawls", profile, &created); code != http.StatusCreated {
		t.Fatalf("POST /api/v1/crawls = %d", code)
	}
	if st := waitFinished(t, api, created.CrawlID, 2*time.Minute); st.State != contracts.CrawlFinished {
		t.Fatalf("crawl state = %s, want finished", st.State)
	}

	files := 0
	err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v, want no access for group and others", path, fi.Mode().Perm())
		}
		if fi.Mode().IsRegular() {
			files++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 5 {
		t.Errorf("data directory holds %d files, want the databases, their WAL files and the WARC segments", files)
	}
}
