package grid

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// TestExportFilesFollowTheUmask: the files grid export writes (a WACZ,
// segments with their index, WET and WAT files), from a running grid's API
// and offline from its data directory, are the user's files: created 0666
// less the umask, as any command's, not 0600 as the data directory's.
func TestExportFilesFollowTheUmask(t *testing.T) {
	start := serveSite(t, "archive.test", archiveHandler())
	data := t.TempDir()
	_, api, stop := startStoppableGrid(t, testConfig(t, data, "archive.test=127.0.0.1"))
	id := crawlToEnd(t, api, contracts.Profile{StartURLs: []string{start}, MaxDepth: 1,
		Politeness: contracts.Politeness{MinDelayMS: 1, MaxDelayMS: 1, DelayFactor: 1}}, time.Minute)
	exports := func(t *testing.T, src ...string) []string {
		dir := t.TempDir()
		wacz := filepath.Join(dir, "crawl.wacz")
		cliExport(t, append(src, "--wacz", "--out", wacz, id)...)
		cliExport(t, append(src, "--out", filepath.Join(dir, "segments"), "segments", id)...)
		cliExport(t, append(src, "--wet", "--wat", "--out", filepath.Join(dir, "derived"), id)...)
		files := []string{wacz}
		for _, sub := range []string{"segments", "derived"} {
			got, _ := filepath.Glob(filepath.Join(dir, sub, "*"))
			if len(got) < 2 {
				t.Fatalf("grid export wrote %v into %s", got, sub)
			}
			files = append(files, got...)
		}
		return files
	}
	check := func(t *testing.T, src ...string) {
		for _, umask := range []int{0o022, 0o077, 0o002} {
			old := syscall.Umask(umask)
			files := exports(t, src...)
			syscall.Umask(old)
			want := fs.FileMode(0o666 &^ umask)
			for _, f := range files {
				fi, err := os.Stat(f)
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode().Perm(); got != want {
					t.Errorf("grid export %v with umask %03o: %s has mode %03o, want %03o", src, umask, filepath.Base(f), got, want)
				}
			}
		}
	}
	check(t, "--api", api)
	stop()
	check(t, "--data", data)
}
