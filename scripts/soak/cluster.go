package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
)

// service is one service process, started again after each kill.
type service struct {
	name, bin string
	metrics   string // its GRIDCRAWL_METRICS_LISTEN address

	mu          sync.Mutex
	cmd         *exec.Cmd
	done        chan struct{} // closed when cmd has exited
	incarnation int           // 1 for the first start, one more for each restart
	started     time.Time
	exits       []string // how each earlier incarnation ended
	stopping    bool     // the soak is stopping the running incarnation (a kill or the end)
	crashes     []string // incarnations that exited on their own
	reported    int      // crashes already reported (and restarted)
}

// newCrashes returns the exits on its own of s not returned before.
func (s *service) newCrashes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.crashes[s.reported:]
	s.reported = len(s.crashes)
	return out
}

// running returns the process id, incarnation and start time of the
// running process, or pid 0 when none runs.
func (s *service) running() (pid, incarnation int, started time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0, s.incarnation, s.started
	}
	select {
	case <-s.done:
		return 0, s.incarnation, s.started
	default:
	}
	return s.cmd.Process.Pid, s.incarnation, s.started
}

// cluster is the services of one run on their backends.
type cluster struct {
	env      []string
	logs     string
	api      string
	token    string
	services []*service
}

// freeAddrs returns n distinct loopback addresses whose ports were free a
// moment ago. The ports lie below the kernel's ephemeral range (32768 and
// up on Linux): a port from that range, free while the soak looks, may be
// the local port of some process's outgoing connection by the time a
// service binds it, or while the service is down after a kill; and every
// listener is held until all n are found, so no two are the same.
func freeAddrs(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	out := make([]string, 0, n)
	for tries := 0; len(out) < n; tries++ {
		if tries > 1000 {
			return nil, errors.New("find free ports: none free in 20000-32767 after 1000 tries")
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+mrand.IntN(12768)))
		if err != nil {
			continue
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// start runs s (again), its output appended to its log.
func (c *cluster) start(s *service) error {
	f, err := os.OpenFile(filepath.Join(c.logs, s.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", s.name, err)
	}
	cmd := exec.Command(s.bin)
	cmd.Env = append(append(os.Environ(), c.env...), "GRIDCRAWL_METRICS_LISTEN="+s.metrics)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.incarnation++
	s.started = time.Now()
	s.stopping = false
	inc := s.incarnation
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		f.Close()
		s.mu.Lock()
		if !s.stopping {
			s.crashes = append(s.crashes, fmt.Sprintf("%s incarnation %d exited on its own at %s: %v (see %s.log)",
				s.name, inc, time.Now().UTC().Format("15:04:05"), err, s.name))
		}
		s.mu.Unlock()
		close(done)
	}()
	return nil
}

// signal sends sig to s's process and waits for it to exit, for at most
// wait (then it is killed).
func (s *service) signal(sig syscall.Signal, wait time.Duration) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.stopping = true
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
	}
	s.mu.Lock()
	s.exits = append(s.exits, fmt.Sprintf("%s: %v", sig, cmd.ProcessState))
	s.cmd = nil
	s.mu.Unlock()
}

// call sends a JSON request to MCP's API and decodes the answer into out.
func (c *cluster) call(method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.api+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	cl := http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode < 300 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// get reads the body of a GET of MCP's API, which must answer 200.
func (c *cluster) get(path string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, c.api+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	cl := http.Client{Timeout: 10 * time.Minute}
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(b[:min(len(b), 300)]))
	}
	return b, nil
}

// waitHealthy waits until MCP answers /healthz.
func (c *cluster) waitHealthy(timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		if code, _ := c.call(http.MethodGet, "/healthz", nil, nil); code == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("mcp did not answer /healthz")
		}
	}
}

// goroutines reads go_goroutines from a service's metrics listener.
func goroutines(addr string) (int, error) {
	cl := http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no go_goroutines in /metrics")
}

// counterNames are the counters the soak adds up over every incarnation of
// every service: what the services did twice, by their own count.
var counterNames = []string{
	`gridcrawl_loader_urls_total{outcome="fetched"}`,
	`gridcrawl_loader_urls_total{outcome="republished"}`,
	`gridcrawl_loader_urls_total{outcome="skipped"}`,
	"gridcrawl_mcp_documents_stored_total",
	"gridcrawl_mcp_documents_indexed_total",
	"gridcrawl_mcp_recovered_urls_total",
}

// summedCounters are counters the soak adds up over all their labels (every
// queue) as well as over incarnations: what the backend outages cost.
var summedCounters = []string{
	"gridcrawl_queue_retried_total",
	"gridcrawl_queue_postponed_total",
	"gridcrawl_queue_dead_lettered_total",
}

// counters reads counterNames and summedCounters from a service's metrics listener; missing
// ones read 0.
func counters(addr string) (map[string]float64, error) {
	cl := http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for _, n := range counterNames {
			if v, ok := strings.CutPrefix(sc.Text(), n+" "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err == nil {
					out[n] = f
				}
			}
		}
		for _, n := range summedCounters {
			line := sc.Text()
			if !strings.HasPrefix(line, n+" ") && !strings.HasPrefix(line, n+"{") {
				continue
			}
			if i := strings.LastIndexByte(line, ' '); i > 0 {
				if f, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
					out[n] += f
				}
			}
		}
	}
	return out, sc.Err()
}

// procRSS returns VmRSS of pid in KiB.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmRSS")
}

// procFDs returns the number of open files of pid.
func procFDs(pid int) (int, error) {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(es), err
}

// ownVhost creates the RabbitMQ virtual host name on the broker (through
// ctl, a rabbitmqctl command), grants the user of amqpURLs every permission
// on it, and returns amqpURLs (a comma-separated list, one URL a node) on
// it and a function that deletes it. Queue names are fixed, so a run on a
// shared virtual host would consume other runs' contracts.
func ownVhost(ctl []string, amqpURLs, name string) (string, func() error, error) {
	urls, err := withVhost(amqpURLs, name)
	if err != nil {
		return "", nil, err
	}
	u, _ := url.Parse(strings.Split(amqpURLs, ",")[0])
	run, drop := vhostDropper(ctl, name)
	if _, err := run("add_vhost", name); err != nil {
		return "", nil, err
	}
	if _, err := run("set_permissions", "-p", name, u.User.Username(), ".*", ".*", ".*"); err != nil {
		return "", nil, errors.Join(err, drop())
	}
	return urls, drop, nil
}

// withVhost returns the comma-separated AMQP URLs with their virtual host
// set to name.
func withVhost(amqpURLs, name string) (string, error) {
	var out []string
	for _, raw := range strings.Split(amqpURLs, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") || u.Host == "" {
			return "", fmt.Errorf("GRIDCRAWL_AMQP_URL: %q is not an amqp:// URL", raw)
		}
		u.Path, u.RawPath = "/"+name, ""
		out = append(out, u.String())
	}
	return strings.Join(out, ","), nil
}

// vhostDropper returns a rabbitmqctl runner and a function that deletes
// the virtual host name.
func vhostDropper(ctl []string, name string) (func(args ...string) (string, error), func() error) {
	run := func(args ...string) (string, error) { return rabbitmqctl(ctl, args...) }
	return run, func() error { _, err := run("delete_vhost", name); return err }
}

// rabbitmqctl runs the rabbitmqctl command ctl with -q and args and returns
// its standard output. When ctl names nodes (after a "-n" each, as
// rabbitmqCtl builds it) they are tried in turn until one answers: on the
// cluster a node may be down.
func rabbitmqctl(ctl []string, args ...string) (string, error) {
	var errs []error
	for _, cmdline := range ctlCommands(ctl) {
		out, errOut, err := runFor(2*time.Minute, cmdline[0], append(append(append([]string(nil), cmdline[1:]...), "-q"), args...)...)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w: %s", strings.Join(cmdline, " "), strings.Join(args, " "), err,
				strings.TrimSpace(errOut+out)))
			continue
		}
		return out, nil
	}
	return "", errors.Join(errs...)
}

// ctlCommands returns the command lines of ctl: ctl itself, or, when it
// holds "-n" followed by a comma-separated list of nodes, one command line
// a node, in order.
func ctlCommands(ctl []string) [][]string {
	for i, a := range ctl {
		if a != "-n" || i+1 >= len(ctl) || !strings.Contains(ctl[i+1], ",") {
			continue
		}
		var out [][]string
		for _, node := range strings.Split(ctl[i+1], ",") {
			line := append(append(append([]string(nil), ctl[:i+1]...), node), ctl[i+2:]...)
			out = append(out, line)
		}
		return out
	}
	return [][]string{ctl}
}

// deleteIndices deletes every Elasticsearch index named prefix-*, one by
// name (wildcard deletes are refused by default).
func deleteIndices(esURL, prefix string) error {
	resp, err := esClient.Get(esURL + "/_cat/indices/" + prefix + "-*?h=index")
	if err != nil {
		return fmt.Errorf("list indices %s-*: %w", prefix, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("list indices %s-*: %w", prefix, err)
	}
	var errs []error
	for _, name := range strings.Fields(string(b)) {
		if !strings.HasPrefix(name, prefix+"-") {
			continue
		}
		req, _ := http.NewRequest(http.MethodDelete, esURL+"/"+name, nil)
		resp, err := esClient.Do(req)
		if err != nil {
			errs = append(errs, fmt.Errorf("delete index %s: %w", name, err))
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			errs = append(errs, fmt.Errorf("delete index %s: %s", name, resp.Status))
		}
	}
	return errors.Join(errs...)
}

// removeBucket deletes every object of bucket and the bucket.
func removeBucket(ctx context.Context, bucket string) error {
	cl, err := minioClient()
	if err != nil {
		return err
	}
	if ok, err := cl.BucketExists(ctx, bucket); err != nil || !ok {
		return err
	}
	objects := cl.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true})
	for e := range cl.RemoveObjects(ctx, bucket, objects, minio.RemoveObjectsOptions{}) {
		return fmt.Errorf("remove object %q: %w", e.ObjectName, e.Err)
	}
	if err := cl.RemoveBucket(ctx, bucket); err != nil {
		return fmt.Errorf("remove bucket %s: %w", bucket, err)
	}
	return nil
}

// bucketBytes returns the objects and bytes stored in bucket.
func bucketBytes(ctx context.Context, bucket string) (int, int64, error) {
	cl, err := minioClient()
	if err != nil {
		return 0, 0, err
	}
	var n int
	var size int64
	for o := range cl.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			return n, size, o.Err
		}
		n++
		size += o.Size
	}
	return n, size, nil
}

// indicesBytes returns the store size of the indices prefix-* in bytes.
func indicesBytes(esURL, prefix string) (int64, error) {
	resp, err := esClient.Get(esURL + "/_cat/indices/" + prefix + "-*?h=store.size&bytes=b")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.ParseInt(f, 10, 64)
		total += n
	}
	return total, nil
}
