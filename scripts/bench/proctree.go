package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/proctree"
)

// The render modes run the grid with Chromium under it, and Chromium's
// processes do not all stay the grid's descendants: when the loader
// restarts its browser, the processes of the old one (renderers, zygote,
// crash handler) lose their parent and would be adopted by init, taking
// their CPU time with them. The bench makes itself a child subreaper, so
// that they are adopted by it instead, reaps them all once the grid has
// exited, and reads the CPU of the whole tree from its own RUSAGE_CHILDREN;
// the grid's own share it reads from /proc while the exited grid is still
// a zombie.

// becomeSubreaper makes orphaned descendants of the bench its children.
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	return nil
}

// procInfo is one process as /proc shows it.
type procInfo = proctree.Proc

// browserProc reports whether p is one of Chromium's processes.
func browserProc(p procInfo) bool { return strings.Contains(p.Cmd, "chrom") }

// memSample is one sample of a render crawl's memory.
type memSample struct {
	t          time.Duration // since the crawl was submitted
	gridRSS    int64
	gridHeap   int64 // the grid's Go heap in use (go_memstats_heap_inuse_bytes); 0 when /metrics did not answer
	browserRSS int64 // all Chromium processes under the bench: their proportional set sizes summed (shared pages once)
	browsers   int   // how many
	indexed    int64 // pages indexed so far; -1 when the API did not answer
}

// treeRun is what one render crawl cost.
type treeRun struct {
	status   contracts.CrawlStatus
	wall     time.Duration // submit to the crawl's end
	cpuAll   float64       // seconds: the grid and every process under it
	cpuGrid  float64       // seconds: the grid process alone
	gridPeak int64         // bytes: the grid process's high-water RSS
	samples  []memSample
	metrics  string // the grid's metrics when it stopped
	leftover []procInfo
	log      string // the grid's log file
}

// browserPeak returns the largest browser RSS sampled.
func (r treeRun) browserPeak() int64 {
	var m int64
	for _, s := range r.samples {
		m = max(m, s.browserRSS)
	}
	return m
}

// metric sums the values of the metric lines of the dump that start with
// prefix (a name, or a name and the start of its labels).
func (r treeRun) metric(prefix string) float64 {
	var sum float64
	for line := range strings.Lines(r.metrics) {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// renderCrawlOpts is one render crawl.
type renderCrawlOpts struct {
	gridBin string
	profile contracts.Profile
	sample  time.Duration // memory sampling interval
	limit   time.Duration // longest the crawl may take
	logDir  string        // where the grid's log goes ("": a temporary file, removed)
	name    string        // of the log file
	verbose bool          // print each sample
	// atEnd, when set, runs once the crawl has ended, before the grid is
	// stopped, with the grid's API and the crawl's id.
	atEnd func(c *apiCaller, crawlID string) error
}

// runRenderCrawl starts the embedded grid (grid up) on a fresh data
// directory, submits the crawl, waits for it to end, stops the grid and
// returns what the crawl cost, the processes under the grid included. The
// bench must be a child subreaper (becomeSubreaper) and have no other
// child processes.
func runRenderCrawl(o renderCrawlOpts) (treeRun, error) {
	data, err := os.MkdirTemp("", "gridcrawl-bench-render-")
	if err != nil {
		return treeRun{}, err
	}
	defer os.RemoveAll(data)
	logDir := o.logDir
	if logDir == "" {
		logDir = data
	}
	run := treeRun{log: filepath.Join(logDir, o.name+".log")}
	logf, err := os.Create(run.log)
	if err != nil {
		return treeRun{}, err
	}
	defer logf.Close()
	var rb [8]byte
	_, _ = rand.Read(rb[:])
	token := hex.EncodeToString(rb[:])
	dump := filepath.Join(data, "metrics.txt")
	dir := filepath.Join(data, "grid")
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru0)
	cmd := exec.Command(o.gridBin, "up", "--data", dir, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "GRIDCRAWL_ALLOW_NETS=127.0.0.0/8", "GRIDCRAWL_RESOLVE="+renderResolve,
		"GRIDCRAWL_AMQP_URL=", "GRIDCRAWL_ES_URL=", "GRIDCRAWL_S3_ENDPOINT=", // the embedded grid
		"GRIDCRAWL_METRICS_DUMP="+dump, "GRIDCRAWL_API_TOKEN="+token, "GRIDCRAWL_DATA=")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return treeRun{}, fmt.Errorf("start grid: %w", err)
	}
	pid := cmd.Process.Pid
	exited := false
	defer func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			reapOrphans(10 * time.Second)
		}
	}()
	var api string
	for deadline := time.Now().Add(60 * time.Second); api == ""; time.Sleep(100 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(dir, "grid.addr")); err == nil {
			api = strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			return treeRun{}, fmt.Errorf("grid did not write its address in 60 s (log: %s)", run.log)
		}
	}
	c := &apiCaller{base: api, token: token, hc: &http.Client{Timeout: 30 * time.Second}}
	var created contracts.CreateCrawlResponse
	if code, err := c.call(http.MethodPost, "/api/v1/crawls", o.profile, &created); err != nil || code != http.StatusCreated {
		return treeRun{}, fmt.Errorf("submit crawl: %d %v", code, err)
	}
	t0 := time.Now()
	var (
		mu   sync.Mutex
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	take := func() {
		table := proctree.Table(true)
		s := memSample{t: time.Since(t0), gridRSS: table[pid].RSS, indexed: -1}
		var browsers []procInfo
		for _, p := range proctree.Descendants(table, os.Getpid()) {
			if browserProc(p) {
				browsers = append(browsers, p)
				s.browsers++
			}
		}
		s.browserRSS = proctree.Memory(browsers)
		var st contracts.CrawlStatus
		if _, err := c.call(http.MethodGet, "/api/v1/crawls/"+created.CrawlID, nil, &st); err == nil {
			s.indexed = st.Counts[contracts.Indexed]
		}
		s.gridHeap = c.metricValue("go_memstats_heap_inuse_bytes")
		if o.verbose {
			fmt.Printf("  %6.0fs  indexed %6d  grid rss %5d MiB  heap %4d MiB  browser %5d MiB in %d processes\n",
				s.t.Seconds(), s.indexed, s.gridRSS>>20, s.gridHeap>>20, s.browserRSS>>20, s.browsers)
		}
		mu.Lock()
		run.samples = append(run.samples, s)
		mu.Unlock()
	}
	go func() {
		defer close(done)
		t := time.NewTicker(o.sample)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				take()
			}
		}
	}()
	var st contracts.CrawlStatus
	for {
		time.Sleep(250 * time.Millisecond)
		if _, err := c.call(http.MethodGet, "/api/v1/crawls/"+created.CrawlID, nil, &st); err != nil {
			close(stop)
			<-done
			return treeRun{}, fmt.Errorf("crawl status: %w", err)
		}
		if st.State == contracts.CrawlFinished || st.State == contracts.CrawlCancelled {
			break
		}
		if time.Since(t0) > o.limit {
			close(stop)
			<-done
			return treeRun{}, fmt.Errorf("crawl not finished after %s: %v (log: %s)", o.limit, st.Counts, run.log)
		}
	}
	run.wall, run.status = time.Since(t0), st
	close(stop)
	<-done
	take()
	run.gridPeak = procHWM(pid)
	var endErr error
	if o.atEnd != nil {
		endErr = o.atEnd(c, created.CrawlID)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	// Wait for the grid to exit but leave it a zombie, whose /proc stat
	// still holds its own CPU time apart from its children's.
	waited := make(chan error, 1)
	go func() {
		var info unix.Siginfo
		waited <- unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	}()
	select {
	case err := <-waited:
		if err != nil {
			return treeRun{}, fmt.Errorf("wait for grid: %w", err)
		}
	case <-time.After(2 * time.Minute):
		return treeRun{}, fmt.Errorf("grid did not stop 2 minutes after SIGTERM (log: %s)", run.log)
	}
	run.cpuGrid = procCPUSelf(pid)
	err = cmd.Wait()
	exited = true
	// The grid has stopped its browser; what is still there of Chromium
	// was left behind.
	run.leftover = reapOrphans(10 * time.Second)
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru1)
	run.cpuAll = tv(ru1.Utime) + tv(ru1.Stime) - tv(ru0.Utime) - tv(ru0.Stime)
	if b, rerr := os.ReadFile(dump); rerr == nil {
		run.metrics = string(b)
	}
	if err != nil {
		return run, fmt.Errorf("grid exited: %w (log: %s)", err, run.log)
	}
	return run, endErr
}

// reapOrphans waits up to wait for the bench's remaining child processes
// (the orphans it adopted as subreaper) to exit, reaping them, then kills
// and reaps those still alive; it returns those.
func reapOrphans(wait time.Duration) []procInfo {
	var left []procInfo
	deadline := time.Now().Add(wait)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.ECHILD):
			return left
		case err != nil && !errors.Is(err, syscall.EINTR):
			return left
		case pid > 0:
			continue
		}
		if time.Now().After(deadline) && left == nil {
			left = proctree.Descendants(proctree.Table(true), os.Getpid())
			for _, p := range left {
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
			if len(left) == 0 {
				return nil
			}
			deadline = time.Now().Add(wait)
		} else if time.Now().After(deadline) {
			return left // killed and still not gone: give up
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procHWM returns the peak resident bytes of a process (VmHWM), or 0.
func procHWM(pid int) int64 {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procCPUSelf returns the CPU seconds of a process itself, its children's
// not included, or 0 when it is gone.
func procCPUSelf(pid int) float64 {
	cpu, _ := procUsage(pid)
	return cpu
}

// apiCaller calls the grid's API.
type apiCaller struct {
	base, token string
	hc          *http.Client
}

// metricValue returns the value of an unlabelled metric of the grid's
// /metrics, 0 when it cannot be read.
func (c *apiCaller) metricValue(name string) int64 {
	req, err := http.NewRequest(http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f)
		}
	}
	return 0
}

func (c *apiCaller) call(method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, err
		}
	}
	return resp.StatusCode, nil
}
