package grid

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demoCommand returns make demo's script, run with its temporary
// directories in tmp and no GRIDCRAWL_ variable of the test's (backends of
// a grid-mode test run) in its environment.
func demoCommand(t *testing.T, tmp string) *exec.Cmd {
	t.Helper()
	script, err := filepath.Abs("../../../scripts/demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GRIDCRAWL_") && !strings.HasPrefix(kv, "TMPDIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	// Its own process group, as a terminal's foreground job, for Ctrl-C.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// leftIn returns the names of the files in dir.
func leftIn(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestDemoScript: make demo crawls its demo site and removes its temporary
// data directory on every exit. Without a terminal it prints no dashboard
// link to follow after it, and says the grid stops; on a terminal the
// dashboard link it prints answers until Ctrl-C, which ends the demo with
// exit status 0.
func TestDemoScript(t *testing.T) {
	dashboard := regexp.MustCompile(`^dashboard: (http://127\.0\.0\.1:\d+/) \(served until you press Ctrl-C`)
	t.Run("no terminal", func(t *testing.T) {
		tmp := t.TempDir()
		cmd := demoCommand(t, tmp)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("demo.sh: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		}
		if !regexp.MustCompile(`crawl \S+ finished in \d+s: [1-9]\d* indexed`).MatchString(stdout.String()) ||
			!strings.Contains(stdout.String(), "no terminal to wait on: the grid stops now and the demo's data is removed") ||
			strings.Contains(stdout.String(), "dashboard: ") {
			t.Errorf("demo.sh stdout:\n%s\nwant the crawl finished, the grid said to stop and no dashboard link", stdout.String())
		}
		if left := leftIn(t, tmp); len(left) > 0 {
			t.Errorf("demo.sh left %q in its TMPDIR", left)
		}
	})
	t.Run("terminal and Ctrl-C", func(t *testing.T) {
		tmp := t.TempDir()
		cmd := demoCommand(t, tmp)
		_, tty := openPTY(t, 120)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stdin, cmd.Stderr = tty, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		sc := bufio.NewScanner(out)
		var link string
		var lines []string
		for link == "" && sc.Scan() {
			lines = append(lines, sc.Text())
			if m := dashboard.FindStringSubmatch(sc.Text()); m != nil {
				link = m[1]
			}
		}
		if link == "" {
			_ = cmd.Wait()
			t.Fatalf("demo.sh on a terminal printed no dashboard link:\n%s\nstderr:\n%s", strings.Join(lines, "\n"), stderr.String())
		}
		go func() { _, _ = io.Copy(io.Discard, out) }()
		// The link answers after the crawl and the search, while the demo waits.
		time.Sleep(300 * time.Millisecond)
		resp, err := http.Get(link)
		if err != nil {
			t.Fatalf("GET %s, the dashboard demo.sh serves: %v", link, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %s, want 200", link, resp.Status)
		}
		// Ctrl-C: the terminal interrupts its foreground process group.
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("demo.sh after Ctrl-C: %v, want exit status 0\nstderr:\n%s", err, stderr.String())
		}
		if left := leftIn(t, tmp); len(left) > 0 {
			t.Errorf("demo.sh left %q in its TMPDIR", left)
		}
		if resp, err := http.Get(link); err == nil {
			resp.Body.Close()
			t.Errorf("GET %s after the demo ended = %s, want no answer", link, resp.Status)
		}
	})
}
