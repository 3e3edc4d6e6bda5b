package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/minioassets"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// gridBench runs MCP, loaders and crawlers as processes on the real
// backends named by the environment (scripts/services/up.sh) and crawls the
// simulated web. When watch is not nil it runs with the services' process
// ids while the crawl runs; when res is not nil it receives the crawl's cost.
// gridOptions are the grid-mode run's choices beyond its shape.
type gridOptions struct {
	// frontier gives each loader a frontier store of its own
	// (GRIDCRAWL_LOADER_FRONTIER_DIR); without it the loaders park.
	frontier bool
	// killLoaderAt kills loader-1 with SIGKILL once this many pages have
	// settled (0: never); the other loaders take its shards over. addCPU,
	// when set, is told the CPU seconds it had used (the watcher keeps
	// counting them once the process is gone).
	killLoaderAt int64
	addCPU       func(float64)
}

func gridBench(web *websim.Web, depth, delay, loaders, crawlers int, binDir string,
	watch watchFunc, res *gridResult, opt gridOptions) error {
	for _, k := range []string{"GRIDCRAWL_AMQP_URL", "GRIDCRAWL_ES_URL", "GRIDCRAWL_S3_ENDPOINT"} {
		if os.Getenv(k) == "" {
			return fmt.Errorf("%s is not set: run eval \"$(scripts/services/up.sh)\" first", k)
		}
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	suffix := hex.EncodeToString(rb[:])
	prefix, bucket, token := "gridbench-"+suffix, "gridbench-"+suffix, "bench-"+suffix
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	logs, err := os.MkdirTemp("", "gridcrawl-bench-logs-")
	if err != nil {
		return err
	}
	// Queue names are fixed, so two grid runs on one virtual host consume
	// each other's contracts (and abandon them: the records are in the
	// other run's indices). Each run gets a virtual host of its own.
	amqpURL, dropVhost, err := ownVhost(os.Getenv("GRIDCRAWL_AMQP_URL"), prefix)
	if err != nil {
		fmt.Fprintf(os.Stderr, "warning: %v; using the broker's default virtual host, which concurrent grid runs share\n", err)
		amqpURL = os.Getenv("GRIDCRAWL_AMQP_URL")
	} else {
		defer dropVhost()
	}
	env := append(os.Environ(), "GRIDCRAWL_AMQP_URL="+amqpURL, "GRIDCRAWL_ES_PREFIX="+prefix, "GRIDCRAWL_S3_BUCKET="+bucket, "GRIDCRAWL_API_TOKEN="+token,
		"GRIDCRAWL_LISTEN="+addr, "GRIDCRAWL_ALLOW_NETS=127.0.0.0/8", "GRIDCRAWL_RESOLVE="+web.Resolve(), "GRIDCRAWL_DATA="+logs,
		"GRIDCRAWL_METRICS_DUMP="+filepath.Join(logs, "metrics"))
	type proc struct {
		name string
		cmd  *exec.Cmd
		log  string
	}
	var procs []*proc
	start := func(name, bin string) error {
		p := &proc{name: name, log: filepath.Join(logs, name+".log")}
		f, err := os.Create(p.log)
		if err != nil {
			return err
		}
		p.cmd = exec.Command(filepath.Join(binDir, bin))
		p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = env, f, f
		if bin == "loader" && opt.frontier {
			p.cmd.Env = append(slices.Clip(env), "GRIDCRAWL_LOADER_FRONTIER_DIR="+filepath.Join(logs, name+"-frontier"))
		}
		if err := p.cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		procs = append(procs, p)
		return nil
	}
	defer func() {
		for _, p := range procs {
			if p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
			}
		}
	}()
	if err := start("mcp", "mcp"); err != nil {
		return err
	}
	for i := range loaders {
		if err := start(fmt.Sprintf("loader-%d", i+1), "loader"); err != nil {
			return err
		}
	}
	for i := range crawlers {
		if err := start(fmt.Sprintf("crawler-%d", i+1), "crawler"); err != nil {
			return err
		}
	}
	api := "http://" + addr
	call := func(method, path string, body, out any) (int, error) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, api+path, rd)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				return resp.StatusCode, err
			}
		}
		return resp.StatusCode, nil
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := call(http.MethodGet, "/healthz", nil, nil); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("mcp did not come up")
		}
	}
	// Let every loader and crawler connect before the clock starts.
	time.Sleep(2 * time.Second)
	p := contracts.Profile{StartURLs: web.StartURLs(), MaxDepth: depth, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: delay, MaxDelayMS: max(delay, 1), DelayFactor: 1}}
	// The backends may serve others meanwhile (a shared machine): their CPU
	// over a few idle seconds before the crawl estimates that background,
	// which the report subtracts as a rate.
	const idle = 5 * time.Second
	idle0 := backendCPU()
	time.Sleep(idle)
	backendCPU0 := backendCPU()
	t0 := time.Now()
	if watch != nil {
		pids := make([]int, len(procs))
		for i, p := range procs {
			pids[i] = p.cmd.Process.Pid
		}
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			watch(func() []int { return pids }, crawlProgress(func() string { return api }, token), stop)
		}()
		defer func() { close(stop); <-done }()
	}
	var created contracts.CreateCrawlResponse
	if code, err := call(http.MethodPost, "/api/v1/crawls", p, &created); err != nil || code != http.StatusCreated {
		return fmt.Errorf("submit crawl: %d %v", code, err)
	}
	if opt.killLoaderAt > 0 {
		victim := procs[1] // loader-1
		progress := crawlProgress(func() string { return api }, token)
		go func() {
			for {
				time.Sleep(200 * time.Millisecond)
				if n, ok := progress(); ok && n >= opt.killLoaderAt {
					cpu, _ := procUsage(victim.cmd.Process.Pid)
					_ = victim.cmd.Process.Signal(syscall.SIGKILL)
					if opt.addCPU != nil {
						opt.addCPU(cpu)
					}
					fmt.Printf("  killed %s (SIGKILL) at %d pages settled; the other loaders take its shards over\n", victim.name, n)
					return
				}
				if victim.cmd.ProcessState != nil {
					return
				}
			}
		}()
	}
	var st contracts.CrawlStatus
	for st.State != contracts.CrawlFinished {
		time.Sleep(500 * time.Millisecond)
		if _, err := call(http.MethodGet, "/api/v1/crawls/"+created.CrawlID, nil, &st); err != nil {
			return fmt.Errorf("crawl status: %w", err)
		}
		if time.Since(t0) > 30*time.Minute {
			return fmt.Errorf("crawl not finished after 30 minutes: %v", st.Counts)
		}
	}
	wall := time.Since(t0)
	backendCPU1 := backendCPU()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	pages := st.Counts[contracts.Indexed] + st.Counts[contracts.Failed] + st.Counts[contracts.Redirected]
	fmt.Printf("grid: mcp, %d loaders, %d crawlers on RabbitMQ, Elasticsearch and MinIO\n", loaders, crawlers)
	fmt.Printf("crawl %s: %s, %d records, %d indexed, %d documents\n", st.CrawlID, st.State, st.Total, st.Counts[contracts.Indexed], st.Documents)
	fmt.Printf("wall %.2fs  pages/s %.0f\n", wall.Seconds(), float64(pages)/wall.Seconds())
	var published int64
	var cpuTotal float64
	for _, p := range procs {
		_ = p.cmd.Wait()
		ru := p.cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu := tv(ru.Utime) + tv(ru.Stime)
		cpuTotal += cpu
		n, err := publishedIn(p.log)
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			err = nil // killed on purpose: no shutdown report, its messages not counted
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if filed, rebuilt, ok := frontierCounts(p.log); ok {
			fmt.Printf("  %-10s filed %d URLs, rebuilt %d\n", p.name, filed, rebuilt)
		}
		published += n
		fmt.Printf("  %-10s cpu %6.2fs  cpu-ms/page %.3f  peak rss %4d MiB  published %d\n", p.name, cpu, 1000*cpu/float64(pages), ru.Maxrss/1024, n)
		if res != nil {
			res.rssMiB = max(res.rssMiB, ru.Maxrss/1024)
			res.services = append(res.services, serviceUsage{name: p.name, cpu: cpu, rssMiB: ru.Maxrss / 1024})
		}
	}
	if res != nil {
		res.pages, res.wall, res.cpu = pages, wall, cpuTotal
		res.status, res.prefix, res.bucket = st, prefix, bucket
	}
	fmt.Printf("all services: cpu-ms/page %.3f\n", 1000*cpuTotal/float64(pages))
	fmt.Printf("broker messages per page: %.3f (%d published)\n", float64(published)/float64(pages), published)
	es, perIndex, err := esIndexStats(os.Getenv("GRIDCRAWL_ES_URL"), prefix)
	if err != nil {
		return err
	}
	fmt.Printf("elasticsearch documents written per page: %.3f (%d, %d new URLs); per page beyond one per new URL: %.3f\n",
		float64(es.docs)/float64(pages), es.docs, st.Total, float64(es.docs-st.Total)/float64(pages))
	fmt.Printf("elasticsearch bulk write requests per page: %.3f (%d)\n", float64(es.bulks)/float64(pages), es.bulks)
	fmt.Printf("elasticsearch gets per page, by its own count (realtime and refreshed): %.3f (%d documents)\n", float64(es.gets)/float64(pages), es.gets)
	reads, byService, err := esReadsIn(filepath.Join(logs, "metrics.*"))
	if err != nil {
		return err
	}
	printESReads(reads, pages)
	for _, svc := range sortedKeys(byService) {
		var b strings.Builder
		for _, k := range sortedReadKeys(byService[svc]) {
			if n := byService[svc][k]; n > 0 && k[1] != "refresh" {
				fmt.Fprintf(&b, "  %s %s %.3f", k[0], k[1], float64(n)/float64(pages))
			}
		}
		fmt.Printf("  reads sent by %-9s%s\n", svc, b.String())
	}
	if res != nil {
		res.reads = reads
	}
	fmt.Printf("elasticsearch time in this crawl's indices, ms per page: indexing %.3f  get %.3f  refresh %.3f (%d refreshes)  merge %.3f  search %.3f\n",
		float64(es.indexMS)/float64(pages), float64(es.getMS)/float64(pages), float64(es.refreshMS)/float64(pages), es.refreshes,
		float64(es.mergeMS)/float64(pages), float64(es.searchMS)/float64(pages))
	for _, name := range sortedKeys(perIndex) {
		x := perIndex[name]
		fmt.Printf("  %-12s documents written/page %.3f  gets/page %.3f  searches/page %.3f  ms/page: indexing %.3f  get %.3f  refresh %.3f  merge %.3f  search %.3f\n", name,
			float64(x.docs)/float64(pages), float64(x.gets)/float64(pages), float64(x.searches)/float64(pages), float64(x.indexMS)/float64(pages),
			float64(x.getMS)/float64(pages), float64(x.refreshMS)/float64(pages), float64(x.mergeMS)/float64(pages), float64(x.searchMS)/float64(pages))
	}
	// net is a backend's CPU milliseconds per page less its idle rate, as
	// text; "n/a" when the process restarted meanwhile (CPU went down).
	net := func(name string) string {
		c := backendCPU1[name] - backendCPU0[name]
		bg := (backendCPU0[name] - idle0[name]) / idle.Seconds() * wall.Seconds()
		if c < 0 || bg < 0 {
			return "n/a (restarted)"
		}
		return fmt.Sprintf("%.3f", 1000*max(c-bg, 0)/float64(pages))
	}
	for _, name := range []string{"elastic", "rabbitmq", "minio"} {
		c := backendCPU1[name] - backendCPU0[name]
		fmt.Printf("  backend %-9s cpu %6.2fs during the crawl  cpu-ms/page %.3f  net of its idle rate before the crawl %s\n",
			name, c, 1000*c/float64(pages), net(name))
	}
	fmt.Printf("elasticsearch threads, cpu-ms/page during the crawl:")
	for _, k := range []string{"work", "jit", "gc", "other"} {
		fmt.Printf("  %s %.3f", k, 1000*(backendCPU1["elastic "+k]-backendCPU0["elastic "+k])/float64(pages))
	}
	fmt.Println()
	fmt.Printf("elasticsearch cpu-ms/page: %.3f, net of its idle rate %s (the whole node: it may serve others meanwhile)\n",
		1000*(backendCPU1["elastic"]-backendCPU0["elastic"])/float64(pages), net("elastic"))
	objs, err := countObjects(bucket)
	if err != nil {
		return err
	}
	fmt.Printf("asset objects per page: %.4f (%d objects)\n", float64(objs)/float64(pages), objs)
	return nil
}

// esReadsIn sums the Elasticsearch reads the services counted
// (gridcrawl_elasticsearch_reads_total) in the metrics files that glob
// matches, by index and kind.
// The second map holds them per service (the dump's name after the glob's
// prefix: metrics.loader.123 is loader), all of one kind summed.
func esReadsIn(glob string) (map[[2]string]int64, map[string]map[[2]string]int64, error) {
	files, err := filepath.Glob(glob)
	if err != nil {
		return nil, nil, err
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("no metrics dump %s", glob)
	}
	out := map[[2]string]int64{}
	byService := map[string]map[[2]string]int64{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		svc := strings.Split(filepath.Base(f), ".")[1]
		if byService[svc] == nil {
			byService[svc] = map[[2]string]int64{}
		}
		for line := range strings.Lines(string(b)) {
			rest, ok := strings.CutPrefix(line, "gridcrawl_elasticsearch_reads_total{")
			if !ok {
				continue
			}
			labels, value, _ := strings.Cut(rest, "} ")
			var n float64
			if _, err := fmt.Sscan(strings.TrimSpace(value), &n); err != nil {
				continue
			}
			label := func(name string) string {
				_, v, _ := strings.Cut(labels, name+`="`)
				v, _, _ = strings.Cut(v, `"`)
				return v
			}
			k := [2]string{label("index"), label("kind")}
			out[k] += int64(n)
			byService[svc][k] += int64(n)
		}
	}
	return out, byService, nil
}

// sortedReadKeys returns the keys of m by index and kind.
func sortedReadKeys(m map[[2]string]int64) [][2]string {
	keys := make([][2]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	return keys
}

// readKinds are the kinds of Elasticsearch read the services count, in
// the order the bench prints them.
var readKinds = []string{"realtime-get", "update", "refreshed-get", "search", "count", "refresh"}

// printESReads prints the reads per page, in all and per index.
func printESReads(reads map[[2]string]int64, pages int64) {
	all := map[string]int64{}
	perIndex := map[string]map[string]int64{}
	for k, n := range reads {
		all[k[1]] += n
		if perIndex[k[0]] == nil {
			perIndex[k[0]] = map[string]int64{}
		}
		perIndex[k[0]][k[1]] += n
	}
	line := func(m map[string]int64) string {
		var b strings.Builder
		for _, k := range readKinds {
			fmt.Fprintf(&b, "  %s %.3f", k, float64(m[k])/float64(pages))
		}
		return b.String()
	}
	fmt.Printf("elasticsearch reads per page, as the services sent them:%s\n", line(all))
	for _, ix := range sortedKeys(perIndex) {
		fmt.Printf("  reads of %-12s%s\n", ix, line(perIndex[ix]))
	}
}

// dropGridData prints the bytes a grid-mode crawl stored per page in each
// Elasticsearch index (its primaries) and in WARC objects, then deletes
// them: left behind, a hundred crawls' indices weigh on the node that the
// next benchmark measures.
func dropGridData(res gridResult) error {
	stored, err := gridStored(res.prefix, res.bucket)
	if err != nil {
		return err
	}
	for _, k := range sortedKeys(stored) {
		fmt.Printf("stored %-16s %12d bytes, %8.0f per page\n", k, stored[k], float64(stored[k])/float64(res.pages))
	}
	return nil
}

// ownVhost creates the RabbitMQ virtual host name on the local broker
// (scripts/services/rabbitmq.sh ctl rabbitmqctl), grants the user of
// amqpURL every permission on it, and returns amqpURL on it and a function
// that deletes it.
func ownVhost(amqpURL, name string) (string, func(), error) {
	u, err := url.Parse(amqpURL)
	if err != nil {
		return "", nil, fmt.Errorf("GRIDCRAWL_AMQP_URL: %w", err)
	}
	ctl := func(args ...string) error {
		out, err := exec.Command("scripts/services/rabbitmq.sh", append([]string{"ctl", "rabbitmqctl", "-q"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("rabbitmqctl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	if err := ctl("add_vhost", name); err != nil {
		return "", nil, err
	}
	drop := func() {
		if err := ctl("delete_vhost", name); err != nil {
			fmt.Fprintf(os.Stderr, "warning: %v\n", err)
		}
	}
	if err := ctl("set_permissions", "-p", name, u.User.Username(), ".*", ".*", ".*"); err != nil {
		drop()
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// publishedIn reads the "published" count a service logs when it stops.
func publishedIn(path string) (int64, error) {
	var n *int64
	if err := scanLog(path, func(line []byte) bool {
		var l struct {
			Msg       string `json:"msg"`
			Published *int64 `json:"published"`
		}
		if json.Unmarshal(line, &l) == nil && l.Msg == "service stopped" && l.Published != nil {
			n = l.Published
		}
		return n == nil
	}); err != nil {
		return 0, err
	}
	if n == nil {
		return 0, errors.New("no shutdown report in the log")
	}
	return *n, nil
}

// frontierCounts reads a loader's shutdown report in its log: the URLs it
// filed in its frontier stores and rebuilt from the transaction index.
func frontierCounts(path string) (filed, rebuilt int64, ok bool) {
	_ = scanLog(path, func(line []byte) bool {
		var l struct {
			Msg     string `json:"msg"`
			Filed   *int64 `json:"filed"`
			Rebuilt *int64 `json:"rebuilt"`
		}
		if json.Unmarshal(line, &l) == nil && l.Msg == "shutdown complete" && l.Filed != nil && l.Rebuilt != nil {
			filed, rebuilt, ok = *l.Filed, *l.Rebuilt, true
		}
		return !ok
	})
	return filed, rebuilt, ok
}

// scanLog calls fn with each line of the log at path until it returns false.
func scanLog(path string, fn func(line []byte) bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && fn(sc.Bytes()) {
	}
	return sc.Err()
}

// esStats is what Elasticsearch counted in the benchmark's indices
// (primaries): documents indexed or deleted, bulk requests, realtime gets,
// refreshes, and the milliseconds spent indexing, getting, refreshing,
// merging and searching. Unlike the node's CPU, these count only this
// crawl's work; they are elapsed times of the operations, not CPU.
type esStats struct {
	docs, bulks, gets, refreshes, searches       int64
	indexMS, getMS, refreshMS, mergeMS, searchMS int64
}

// esIndexStats returns the statistics of the indices of prefix, in all
// and per index (by the name's part after the prefix).
func esIndexStats(esURL, prefix string) (esStats, map[string]esStats, error) {
	resp, err := http.Get(esURL + "/" + prefix + "-*/_stats/indexing,bulk,get,refresh,merge,search")
	if err != nil {
		return esStats{}, nil, fmt.Errorf("elasticsearch stats: %w", err)
	}
	defer resp.Body.Close()
	type shardStats struct {
		Primaries struct {
			Indexing struct {
				IndexTotal  int64 `json:"index_total"`
				IndexMS     int64 `json:"index_time_in_millis"`
				DeleteTotal int64 `json:"delete_total"`
			} `json:"indexing"`
			Bulk struct {
				TotalOperations int64 `json:"total_operations"`
			} `json:"bulk"`
			Get struct {
				Total int64 `json:"total"`
				MS    int64 `json:"time_in_millis"`
			} `json:"get"`
			Refresh struct {
				Total int64 `json:"total"`
				MS    int64 `json:"total_time_in_millis"`
			} `json:"refresh"`
			Merges struct {
				MS int64 `json:"total_time_in_millis"`
			} `json:"merges"`
			Search struct {
				QueryTotal int64 `json:"query_total"`
				QueryMS    int64 `json:"query_time_in_millis"`
				FetchMS    int64 `json:"fetch_time_in_millis"`
			} `json:"search"`
		} `json:"primaries"`
	}
	var s struct {
		All     shardStats            `json:"_all"`
		Indices map[string]shardStats `json:"indices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return esStats{}, nil, fmt.Errorf("decode elasticsearch stats: %w", err)
	}
	conv := func(x shardStats) esStats {
		p := x.Primaries
		return esStats{
			docs: p.Indexing.IndexTotal + p.Indexing.DeleteTotal, bulks: p.Bulk.TotalOperations, gets: p.Get.Total,
			refreshes: p.Refresh.Total, indexMS: p.Indexing.IndexMS, getMS: p.Get.MS, refreshMS: p.Refresh.MS,
			mergeMS: p.Merges.MS, searchMS: p.Search.QueryMS + p.Search.FetchMS, searches: p.Search.QueryTotal,
		}
	}
	per := map[string]esStats{}
	for name, x := range s.Indices {
		per[strings.TrimPrefix(name, prefix+"-")] = conv(x)
	}
	return conv(s.All), per, nil
}

func countObjects(bucket string) (int, error) {
	ctx := context.Background()
	st, err := minioassets.Open(ctx, minioassets.Options{Endpoint: os.Getenv("GRIDCRAWL_S3_ENDPOINT"),
		AccessKey: os.Getenv("GRIDCRAWL_S3_ACCESS_KEY"), SecretKey: os.Getenv("GRIDCRAWL_S3_SECRET_KEY"), Bucket: bucket})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	keys, err := st.List(ctx, "")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		if strings.HasPrefix(k, "warc/") {
			n++
		}
	}
	return n, nil
}

// backendCPU returns the CPU seconds used so far by the local backend
// processes (Elasticsearch's java, RabbitMQ's beam.smp, minio), by name.
func backendCPU() map[string]float64 {
	out := map[string]float64{}
	names := map[string]string{"java": "elastic", "beam.smp": "rabbitmq", "minio": "minio"}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join("/proc", d.Name(), "comm"))
		if err != nil {
			continue
		}
		name, ok := names[strings.TrimSpace(string(comm))]
		if !ok {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: utime and stime are 14 and 15.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
		f := strings.Fields(rest)
		if len(f) < 13 {
			continue
		}
		out[name] += ticks(f)
		if name == "elastic" {
			javaThreads(filepath.Join("/proc", d.Name(), "task"), out)
		}
	}
	return out
}

// ticks returns the CPU seconds of a /proc stat line's fields after the
// command: utime and stime are fields 14 and 15, in clock ticks (USER_HZ
// = 100 on Linux).
func ticks(f []string) float64 {
	var ut, st float64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return (ut + st) / 100
}

// javaThreads adds the CPU seconds of the Elasticsearch JVM's threads
// (under task) to out by kind: "elastic jit" (the C1 and C2 compilers),
// "elastic gc" (the collector's threads and the VM thread), "elastic
// work" (Elasticsearch's own threads: requests, indexing, refreshes,
// merges) and "elastic other". Linux keeps the first 15 bytes of a
// thread's name, which tells these apart but not Elasticsearch's pools.
func javaThreads(task string, out map[string]float64) {
	dirs, _ := os.ReadDir(task)
	for _, d := range dirs {
		comm, err1 := os.ReadFile(filepath.Join(task, d.Name(), "comm"))
		stat, err2 := os.ReadFile(filepath.Join(task, d.Name(), "stat"))
		if err1 != nil || err2 != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		if len(f) < 13 {
			continue
		}
		kind := "other"
		switch c := strings.TrimSpace(string(comm)); {
		case strings.Contains(c, "CompilerThre"):
			kind = "jit"
		case strings.HasPrefix(c, "GC Thread"), strings.HasPrefix(c, "G1 "), c == "VM Thread":
			kind = "gc"
		case strings.HasPrefix(c, "elasticsearch["):
			kind = "work"
		}
		out["elastic "+kind] += ticks(f)
	}
}
