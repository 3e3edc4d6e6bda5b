package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// sample is one row of samples.tsv.
type sample struct {
	t           float64 // seconds into the run
	service     string
	incarnation int
	start       float64 // seconds into the run when the incarnation started
	pid         int
	rssKiB      int64
	goroutines  int // -1: metrics did not answer
	fds         int
}

// recorder keeps the samples and events of the run and writes them as TSV.
type recorder struct {
	t0      time.Time
	mu      sync.Mutex
	samples []sample
	tsv     *bufio.Writer
	events  *bufio.Writer
}

func (r *recorder) since() float64 { return time.Since(r.t0).Seconds() }

// event writes one line to events.tsv and to stdout.
func (r *recorder) event(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.events, "%.1f\t%s\n", r.since(), msg)
	r.events.Flush()
	fmt.Printf("[%6.0fs] %s\n", r.since(), msg)
}

// take samples every running service once; progress is the pages settled
// so far in all crawls (-1 when MCP did not answer).
func (r *recorder) take(svcs []*service, progress int64) {
	t := r.since()
	// Services are scraped at once: MCP's /metrics may take seconds on a
	// loaded machine (its crawl collector reads the store), which must not
	// delay the others' samples.
	got := make([]*sample, len(svcs))
	var wg sync.WaitGroup
	for i, s := range svcs {
		pid, inc, started := s.running()
		if pid == 0 {
			continue
		}
		rss, err1 := procRSS(pid)
		fds, err2 := procFDs(pid)
		if err1 != nil || err2 != nil {
			continue // exited meanwhile
		}
		got[i] = &sample{t: t, service: s.name, incarnation: inc, start: started.Sub(r.t0).Seconds(), pid: pid, rssKiB: rss, fds: fds}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := goroutines(s.metrics)
			if err != nil {
				g = -1
			}
			got[i].goroutines = g
		}()
	}
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sm := range got {
		if sm == nil {
			continue
		}
		r.samples = append(r.samples, *sm)
		fmt.Fprintf(r.tsv, "%.1f\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", sm.t, sm.service, sm.incarnation, sm.pid, sm.rssKiB, sm.goroutines, sm.fds, progress)
	}
	r.tsv.Flush()
}

// settled returns the pages settled (indexed, failed, redirected) in all
// crawls, or -1 when MCP does not answer.
func (c *cluster) settled() int64 {
	var list contracts.CrawlList
	if code, err := c.call(http.MethodGet, "/api/v1/crawls", nil, &list); err != nil || code != http.StatusOK {
		return -1
	}
	var n int64
	for _, st := range list.Crawls {
		n += st.Counts[contracts.Indexed] + st.Counts[contracts.Failed] + st.Counts[contracts.Redirected]
	}
	return n
}

// maxCrashes is how often a service may exit on its own (and be started
// again) before the soak gives up: one that cannot start would loop.
const maxCrashes = 3

// epoch is one crawl over one web.
type epoch struct {
	n     int
	web   *websim.Web
	want  []string
	id    string
	start time.Time
}

func run(ctx context.Context, c config) (err error) {
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	suffix := hex.EncodeToString(rb[:])
	prefix, bucket, token := "gridsoak-"+suffix, "gridsoak-"+suffix, "soak-"+suffix
	out := c.out
	if out == "" {
		if out, err = os.MkdirTemp("", "gridcrawl-soak-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	data, err := os.MkdirTemp("", "gridcrawl-soak-data-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	amqpURL, _, err := ownVhost(c.rabbitmqctl, os.Getenv("GRIDCRAWL_AMQP_URL"), prefix)
	if err != nil {
		return fmt.Errorf("own virtual host (concurrent grid runs on one virtual host take each other's contracts): %w", err)
	}
	defer func() {
		if c.keep {
			fmt.Printf("kept: virtual host, indices %s-*, bucket %s\n", prefix, bucket)
			return
		}
		if e := cleanUp(prefix, c.rabbitmqctl); e != nil {
			fmt.Fprintf(os.Stderr, "soak: clean up: %v\n", e)
		}
	}()
	// The API and every service's metrics listener: distinct ports.
	addrs, err := freeAddrs(1 + 1 + c.loaders + c.crawlers)
	if err != nil {
		return err
	}
	apiAddr := addrs[0]
	cl := &cluster{logs: out, api: "http://" + apiAddr, token: token}
	cl.env = []string{"GRIDCRAWL_AMQP_URL=" + amqpURL, "GRIDCRAWL_ES_PREFIX=" + prefix, "GRIDCRAWL_S3_BUCKET=" + bucket,
		"GRIDCRAWL_API_TOKEN=" + token, "GRIDCRAWL_LISTEN=" + apiAddr, "GRIDCRAWL_ALLOW_NETS=127.0.0.0/8",
		"GRIDCRAWL_RESOLVE=*." + websim.WebZone + "=127.0.0.1", "GRIDCRAWL_DATA=" + data, "GRIDCRAWL_LOG_LEVEL=" + c.logLevel}
	names := []struct{ name, bin string }{{"mcp", "mcp"}}
	for i := range c.loaders {
		names = append(names, struct{ name, bin string }{fmt.Sprintf("loader-%d", i+1), "loader"})
	}
	for i := range c.crawlers {
		names = append(names, struct{ name, bin string }{fmt.Sprintf("crawler-%d", i+1), "crawler"})
	}
	for i, n := range names {
		addr := addrs[1+i]
		bin, err := filepath.Abs(filepath.Join(c.binDir, n.bin))
		if err != nil {
			return err
		}
		cl.services = append(cl.services, &service{name: n.name, bin: bin, metrics: addr})
	}
	defer func() {
		for _, s := range cl.services {
			s.signal(syscall.SIGKILL, 10*time.Second)
		}
	}()
	tsvF, err := os.Create(filepath.Join(out, "samples.tsv"))
	if err != nil {
		return err
	}
	defer tsvF.Close()
	evF, err := os.Create(filepath.Join(out, "events.tsv"))
	if err != nil {
		return err
	}
	defer evF.Close()
	rec := &recorder{t0: time.Now(), tsv: bufio.NewWriter(tsvF), events: bufio.NewWriter(evF)}
	fmt.Fprintln(rec.tsv, "t_s\tservice\tincarnation\tpid\trss_kib\tgoroutines\topen_fds\tpages_settled")
	fmt.Fprintln(rec.events, "t_s\tevent")
	perHost := c.pages / c.hosts
	fmt.Printf("soak: %s, then up to %s for the last crawl; web %d hosts x %d pages (%d B, %d links, %d cross-host), min delay %d ms (bound %.0f pages/s)\n",
		c.duration, c.drain, c.hosts, perHost, c.pageBytes, c.links, c.cross, c.delayMS, float64(c.hosts)*1000/float64(c.delayMS))
	fmt.Printf("services: mcp, %d loaders, %d crawlers; kill -9 every %s (max %d, 0 = no limit), restart after %s; samples every %s\n",
		c.loaders, c.crawlers, c.killEvery, c.maxKills, c.restartAfter, c.sample)
	if len(c.backendKills) > 0 {
		restart := "started again " + c.restartAfter.String() + " after its kill"
		if c.noRestart {
			restart = "left down"
		}
		fmt.Printf("backend kills: %s at %v of the reachable pages fetched, each %s\n", strings.Join(c.backendKills, ", "), c.killAt[:len(c.backendKills)], restart)
	}
	fmt.Printf("output: %s (samples.tsv, events.tsv, summary.txt, service logs)\n", out)
	for _, s := range cl.services {
		if err := cl.start(s); err != nil {
			return err
		}
		if s.name == "mcp" {
			if err := cl.waitHealthy(60 * time.Second); err != nil {
				return err
			}
		}
	}
	time.Sleep(2 * time.Second) // let every loader and crawler connect
	rec.event("services started")

	// Samples run on their own clock, kills and crawls on the main loop's.
	var progress struct {
		sync.Mutex
		n int64
	}
	stopSampling, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(c.sample)
		defer tick.Stop()
		for {
			n := cl.settled()
			progress.Lock()
			if n >= 0 {
				progress.n = n
			}
			p := progress.n
			progress.Unlock()
			rec.take(cl.services, p)
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { close(stopSampling); <-sampled }()

	victims := cl.services
	if c.victims != "" {
		victims = nil
		for _, name := range strings.Split(c.victims, ",") {
			for _, s := range cl.services {
				if s.name == strings.TrimSpace(name) {
					victims = append(victims, s)
				}
			}
		}
		if len(victims) == 0 {
			return fmt.Errorf("-victims %q names no service (mcp, loader-N, crawler-N)", c.victims)
		}
	}
	rng := mrand.New(mrand.NewPCG(uint64(c.seed), 7))
	var bag []*service
	delay := time.Duration(c.delayMS) * time.Millisecond
	newEpoch := func(n int) (*epoch, error) {
		web := websim.NewWeb(websim.WebConfig{Hosts: c.hosts, PagesPerHost: perHost, LinksPerPage: c.links, CrossHostLinks: c.cross,
			PageBytes: c.pageBytes, Seed: c.seed + int64(n), RecordRequests: true})
		if err := web.Start(); err != nil {
			return nil, fmt.Errorf("start simulated web: %w", err)
		}
		e := &epoch{n: n, web: web, want: expectedWeb(web, web.StartURLs(), contracts.MaxDepthLimit)}
		p := contracts.Profile{StartURLs: web.StartURLs(), MaxDepth: contracts.MaxDepthLimit, Scope: contracts.ScopeDomain,
			Politeness: contracts.Politeness{MinDelayMS: c.delayMS, MaxDelayMS: c.delayMS, DelayFactor: 1}}
		// MCP may be down (killed) at this moment: retry for a while.
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
			var created contracts.CreateCrawlResponse
			code, err := cl.call(http.MethodPost, "/api/v1/crawls", p, &created)
			if err == nil && code == http.StatusCreated {
				e.id, e.start = created.CrawlID, time.Now()
				break
			}
			if time.Now().After(deadline) {
				web.Close()
				return nil, fmt.Errorf("submit crawl: %d %v", code, err)
			}
		}
		rec.event("crawl %d submitted: %s, %d reachable pages on %s", n, e.id, len(e.want), web.StartURLs()[0])
		return e, nil
	}
	cur, err := newEpoch(1)
	if err != nil {
		return err
	}
	// -capacity: the frontier is sampled while the crawl runs, and its
	// largest sample (most URLs waiting) reported.
	var frontier struct {
		sync.Mutex
		best frontierSample
	}
	stopFrontierSampling := func() {}
	if c.capacity {
		stopFrontier, frontierDone := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(frontierDone)
			for {
				select {
				case <-stopFrontier:
					return
				case <-time.After(5 * time.Second):
				}
				esURL, err := liveES()
				if err != nil {
					continue
				}
				s, err := sampleFrontier(c.rabbitmqctl, prefix, esURL, prefix+"-transactions")
				if err != nil {
					rec.event("capacity: frontier sample: %v", err)
					continue
				}
				frontier.Lock()
				if s.urls > frontier.best.urls {
					frontier.best = s
				}
				frontier.Unlock()
			}
		}()
		var once sync.Once
		stopFrontierSampling = func() { once.Do(func() { close(stopFrontier); <-frontierDone }) }
		defer stopFrontierSampling()
	}
	var results []epochResult
	var kills []outage
	var oracles []crawlOracle
	var rateSeries []int // pages fetched each second of the first crawl, from its start
	finish := func(e *epoch, st contracts.CrawlStatus, finished bool) error {
		esURL, err := liveES()
		if err != nil {
			return fmt.Errorf("check crawl %s: %w", e.id, err)
		}
		// The documented termination query, right after MCP said finished:
		// zero is final, and MCP never says finished while it is above zero.
		pending, pendingErr := int64(-1), error(nil)
		if finished {
			pending, pendingErr = terminationCount(esURL, prefix+"-transactions", e.id)
		}
		r, err := check(esURL, prefix+"-web", prefix+"-transactions", e.web, e.want, st, delay, kills)
		if e.n == 1 {
			rateSeries = perSecond(e.web.RequestLog(), e.start)
		}
		e.web.Close()
		if err != nil {
			return fmt.Errorf("check crawl %s: %w", e.id, err)
		}
		r.pending, r.pendingErr = pending, pendingErr
		oracles = append(oracles, crawlOracle{id: e.id, want: e.want})
		r.epoch, r.finished, r.wall, r.start = e.n, finished, time.Since(e.start), e.start
		results = append(results, r)
		rec.event("crawl %d %s after %s: %d reachable, %d documents, %d lost, %d fetched more than once, %d stored more than once (%d stores beyond one a document: %d after a depth lowering, %d redone after a kill)",
			e.n, map[bool]string{true: "finished", false: "NOT finished"}[finished], r.wall.Round(time.Second), r.expected, r.documents, r.lost,
			r.requests.FetchedTwice, r.rewritten, r.stores, r.relowered, r.replayed)
		rec.event("crawl %d: termination query %d (err %v); politeness: shortest gap %s (%s) over %d hosts, %d hosts below the delay",
			e.n, r.pending, r.pendingErr, r.polite.min.Round(time.Millisecond), r.polite.minHost, r.polite.hosts, len(r.polite.short))
		return nil
	}
	// Counters of the services, added up over their incarnations: read
	// just before each kill (what the killed process did since then is not
	// counted) and at the end.
	totals, capTotals := map[string]float64{}, map[string]float64{}
	addCounters := func(s *service) {
		m, err := counters(s.metrics)
		if err != nil {
			rec.event("counters of %s: %v", s.name, err)
			return
		}
		for k, v := range m {
			totals[k] += v
		}
		if !c.capacity {
			return
		}
		m, err = capacitySeries(s.metrics)
		if err != nil {
			rec.event("counters of %s: %v", s.name, err)
			return
		}
		for k, v := range m {
			capTotals[k] += v
		}
	}
	var nodeKills []*nodeKill
	for i, t := range c.backendKills {
		nodeKills = append(nodeKills, &nodeKill{target: t, at: c.killAt[i]})
	}
	nextNode, nodesDown := 0, 0 // nodesDown: killed, to be started again, not yet back
	// nodes.log: what cluster.sh start printed for each node started again.
	nodesLog := filepath.Join(out, "nodes.log")
	startDone := make(chan *nodeKill, len(nodeKills))
	launched := map[*nodeKill]bool{}
	var starts sync.WaitGroup
	defer starts.Wait() // a node being started is waited for: the clusters are left whole
	defer func() {
		// A run that ends early (an error, an interrupt) starts the nodes it
		// killed and had not started yet, unless they are to stay down.
		for _, k := range nodeKills {
			if c.noRestart || k.killed.IsZero() || launched[k] {
				continue
			}
			fmt.Printf("starting %s again before the soak ends\n", k.node)
			if err := startNode(c.clusterSh, k.node, nodesLog); err != nil {
				fmt.Fprintf(os.Stderr, "soak: start %s: %v\n", k.node, err)
			}
		}
	}()
	var crashes []string
	nKills := 0
	nextKill := rec.t0.Add(c.killEvery)
	type restart struct {
		s  *service
		at time.Time
	}
	var pending []restart
	end := rec.t0.Add(c.duration)
	last := contracts.CrawlStatus{CrawlID: cur.id}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", ctx.Err())
		case <-time.After(time.Second):
		}
		now := time.Now()
		// A service that exited on its own fails the run; it is started
		// again so that the other checks still say what they find.
		for _, s := range cl.services {
			for _, msg := range s.newCrashes() {
				crashes = append(crashes, msg)
				rec.event("FAIL: %s", msg)
				if s.reported > maxCrashes {
					return fmt.Errorf("%s exited on its own %d times, last: %s", s.name, s.reported, msg)
				}
				if err := cl.start(s); err != nil {
					return err
				}
				_, inc, _ := s.running()
				rec.event("restarted %s (incarnation %d) after it exited on its own", s.name, inc)
			}
		}
		// Backend nodes: start the killed ones again when due, then kill
		// the next at its share of the pages fetched, once no node is
		// down (with -no-restart they stay down, one of each cluster).
		for _, k := range nodeKills {
			if k.killed.IsZero() || c.noRestart || launched[k] || now.Before(k.killed.Add(c.restartAfter)) {
				continue
			}
			launched[k] = true
			rec.event("starting %s again (cluster.sh start: until it has rejoined)", k.node)
			starts.Add(1)
			go func() {
				defer starts.Done()
				t := time.Now()
				k.startErr = startNode(c.clusterSh, k.node, nodesLog)
				k.startTook = time.Since(t)
				k.started = time.Now()
				startDone <- k
			}()
		}
	drained:
		for {
			select {
			case k := <-startDone:
				nodesDown--
				if k.startErr != nil {
					rec.event("FAIL: start %s: %v", k.node, k.startErr)
				} else {
					rec.event("started %s: rejoined after %s (down %s)", k.node, k.startTook.Round(time.Second), k.started.Sub(k.killed).Round(time.Second))
				}
			default:
				break drained
			}
		}
		if nextNode < len(nodeKills) && (c.noRestart || nodesDown == 0) {
			k := nodeKills[nextNode]
			if fetched := pagesFetched(cur.web); float64(fetched) >= k.at*float64(len(cur.want)) {
				node, why, err := chooseNode(c.clusterSh, c.rabbitmqctl, k.target, prefix)
				if err != nil {
					return fmt.Errorf("choose the %s node to kill: %w", k.target, err)
				}
				if err := killNode(c.clusterSh, node); err != nil {
					return fmt.Errorf("kill %s: %w", node, err)
				}
				k.node, k.why, k.fetched, k.killed = node, why, fetched, time.Now()
				k.share = float64(fetched) / float64(len(cur.want))
				nextNode++
				if !c.noRestart {
					nodesDown++
				}
				rec.event("kill -9 node %s (%s: %s) at %d pages fetched (%.0f%% of %d reachable)", node, k.target, why, fetched,
					100*k.share, len(cur.want))
			}
		}
		for len(pending) > 0 && now.After(pending[0].at) {
			s := pending[0].s
			pending = pending[1:]
			if err := cl.start(s); err != nil {
				return err
			}
			_, inc, started := s.running()
			rec.event("restarted %s (incarnation %d)", s.name, inc)
			for i := range kills {
				if kills[i].service == s.name && kills[i].to.IsZero() {
					kills[i].to = started
				}
			}
		}
		if c.killEvery > 0 && now.Before(end) && now.After(nextKill) && (c.maxKills == 0 || nKills < c.maxKills) && len(pending) == 0 {
			// Victims are drawn in rounds, each a shuffle of all of them:
			// random, but every service is killed as often as the others.
			if len(bag) == 0 {
				bag = append(bag, victims...)
				rng.Shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
			}
			s := bag[0]
			bag = bag[1:]
			pid, inc, _ := s.running()
			addCounters(s)
			kills = append(kills, outage{service: s.name, from: time.Now()})
			s.signal(syscall.SIGKILL, 10*time.Second)
			nKills++
			rec.event("kill -9 %s (pid %d, incarnation %d)", s.name, pid, inc)
			pending = append(pending, restart{s, time.Now().Add(c.restartAfter)})
			nextKill = nextKill.Add(c.killEvery)
		}
		if now.After(end.Add(c.drain)) {
			rec.event("crawl %d not finished %s after the soak: %v", cur.n, c.drain, last.Counts)
			if err := finish(cur, last, false); err != nil {
				return err
			}
			break
		}
		var st contracts.CrawlStatus
		if code, err := cl.call(http.MethodGet, "/api/v1/crawls/"+cur.id, nil, &st); err != nil || code != http.StatusOK {
			continue // MCP is down or restarting
		}
		last = st
		if st.State == contracts.CrawlFinished && len(pending) == 0 && nodesDown == 0 {
			if err := finish(cur, st, true); err != nil {
				return err
			}
			if !c.recrawl || !time.Now().Before(end) {
				break
			}
			if used := diskMiB(prefix); used > c.maxDiskMiB {
				rec.event("no further crawl: the run's indices and objects take %d MiB, over -max-disk-mib %d", used, c.maxDiskMiB)
				end = time.Now() // the soak ends with the crawls it could hold
				break
			}
			if cur, err = newEpoch(cur.n + 1); err != nil {
				return err
			}
			last = contracts.CrawlStatus{CrawlID: cur.id}
			continue
		}
	}
	wall := time.Since(rec.t0)
	stopFrontierSampling() // its counts must not add to the capacity report's queries
	starts.Wait()          // a start still running (the crawl timed out) returns
	for _, s := range cl.services {
		for _, msg := range s.newCrashes() {
			crashes = append(crashes, msg)
			rec.event("FAIL: %s", msg)
		}
	}
	// One last sample of the idle services before they stop.
	rec.take(cl.services, cl.settled())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	objs, objBytes, objErr := bucketBytes(ctx, bucket)
	cancel()
	esBytes, esErr := int64(0), error(nil)
	if esURL, err := liveES(); err != nil {
		esErr = err
	} else {
		esBytes, esErr = indicesBytes(esURL, prefix)
	}
	for _, s := range cl.services {
		addCounters(s)
	}
	// The queues and the archive, while MCP still serves the crawls'
	// segments and CDXJ.
	dead, queues, deadErr := deadLetters(c.rabbitmqctl, prefix)
	var arch archiveResult
	var archErr error
	if c.archiveCheck {
		rec.event("archive check: warcio check of every segment, every CDXJ line read back")
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		arch, archErr = checkArchive(ctx, cl, c.warcio, bucket, oracles)
		cancel()
		rec.event("archive check: %d segments (%d MiB), %d CDXJ lines, %d read back, %d problems", arch.segments, arch.bytes>>20, arch.lines, arch.readBack, len(arch.problems))
	}
	for _, s := range cl.services {
		s.signal(syscall.SIGTERM, 30*time.Second)
	}
	f, err := os.Create(filepath.Join(out, "summary.txt"))
	if err != nil {
		return err
	}
	defer f.Close()
	w := io.MultiWriter(os.Stdout, f)
	fmt.Fprintf(w, "\nsoak of %s (kills within the first %s): %d kills; web %d hosts x %d pages, %d B/page, min delay %d ms\n",
		wall.Round(time.Second), c.duration, nKills, c.hosts, perHost, c.pageBytes, c.delayMS)
	fmt.Fprintf(w, "load average at the end: %s", loadavg())
	if objErr == nil && esErr == nil {
		fmt.Fprintf(w, "disk: %d MiB in Elasticsearch indices, %d MiB in %d MinIO objects (deleted at the end unless -keep)\n", esBytes>>20, objBytes>>20, objs)
	}
	rec.mu.Lock()
	samples := append([]sample(nil), rec.samples...)
	rec.mu.Unlock()
	report(w, samples, wall.Seconds(), c.sample.Seconds())
	lost, twiceFetched, twiceStored, multi, extra, unfinished := 0, 0, 0, 0, 0, 0
	var stores, lowered, replayed int64
	refetched := 0
	fmt.Fprintf(w, "\ncrawls (oracle: the web's link graph; fetches: the web server's request log; stores: Elasticsearch _version of each document)\n")
	fmt.Fprintf(w, "%-5s %-26s %-8s %8s %9s %9s %5s %5s %7s %8s %7s %7s %8s %8s %7s %6s %8s %8s\n", "crawl", "id", "state", "wall", "reachable", "documents",
		"lost", "extra", "fetched", "after a", "stored", "extra", "after a", "redone", "unex-", "short", "overlaps", "pages/s")
	fmt.Fprintf(w, "%-5s %-26s %-8s %8s %9s %9s %5s %5s %7s %8s %7s %7s %8s %8s %7s %6s %8s %8s\n", "", "", "", "", "", "", "", "", "twice", "ldr kill", "twice", "stores", "lowering", "aft kill", "plained", "gaps", "", "")
	for _, r := range results {
		state := "finished"
		if !r.finished {
			state = "running"
			unfinished++
		}
		fmt.Fprintf(w, "%-5d %-26s %-8s %8s %9d %9d %5d %5d %7d %8d %7d %7d %8d %8d %7d %6d %8d %8.1f\n", r.epoch, r.crawlID, state, r.wall.Round(time.Second),
			r.expected, r.documents, r.lost, r.extra, r.requests.FetchedTwice, r.refetchedAfterKill, r.rewritten, r.stores, r.relowered, r.replayed, r.stores-r.relowered-r.replayed,
			r.requests.ShortGaps, r.requests.Overlaps, float64(r.requests.Pages)/r.wall.Seconds())
		if r.finished {
			lost += r.lost
		}
		twiceFetched += r.requests.FetchedTwice
		refetched += r.refetchedAfterKill
		twiceStored += r.rewritten
		stores += r.stores
		lowered += r.relowered
		replayed += r.replayed
		multi += r.multiDoc
		extra += r.extra
		for _, ex := range r.examples {
			fmt.Fprintf(w, "      %s\n", ex)
		}
	}
	fmt.Fprintf(w, "pages lost: %d   fetched twice: %d (%d of them first fetched just before a loader kill, at-least-once)   indexed twice: %d documents stored more than once, %d stores beyond one a document: %d after a depth lowering (by design), %d work in flight at a kill done again (at-least-once: an MCP's index batch, a crawler's page, a loader's republished page), %d unexplained; %d URLs with two documents   unexpected documents: %d   unfinished crawls: %d\n",
		lost, twiceFetched, refetched, twiceStored, stores, lowered, replayed, stores-lowered-replayed, multi, extra, unfinished)
	if len(results) > 0 {
		r := results[0]
		fmt.Fprintf(w, "rate\t%d\t%.1f\t%.1f\t(crawl 1: pages fetched, seconds from submission to finished, pages/s)\n",
			r.requests.Pages, r.wall.Seconds(), float64(r.requests.Pages)/r.wall.Seconds())
	}
	docs := 0
	for _, r := range results {
		docs += r.documents
	}
	fmt.Fprintf(w, "services' own counts over all incarnations (read before each kill and at the end): loader fetched %.0f, republished %.0f (fetched before, crawler contract published again), skipped %.0f; mcp documents stored %.0f (%d documents exist), pages indexed %.0f, recovery sweep republished %.0f\n",
		totals[counterNames[0]], totals[counterNames[1]], totals[counterNames[2]], totals[counterNames[3]], docs, totals[counterNames[4]], totals[counterNames[5]])
	var fails []string
	if int64(lost+twiceFetched-refetched+multi+extra+unfinished)+stores-lowered-replayed > 0 {
		fails = append(fails, "lost, unfinished or duplicated work (the crawls' table above)")
	}
	if c.capacity {
		switch esURL, err := liveES(); {
		case err != nil:
			fmt.Fprintf(w, "capacity: %v\n", err)
		case len(results) != 1:
			fmt.Fprintf(w, "capacity: %d crawls, want one (-recrawl=false)\n", len(results))
		default:
			frontier.Lock()
			best := frontier.best
			frontier.Unlock()
			if err := capacityReport(w, esURL, prefix, bucket, results[0].requests.Pages, capTotals, best); err != nil {
				fmt.Fprintf(w, "capacity: %v\n", err)
			}
		}
	}
	fails = append(fails, runChecks(w, c, results, crashes, nodeKills, rateSeries, totals, dead, queues, deadErr, arch, archErr, prefix)...)
	if len(fails) > 0 {
		fmt.Fprintf(w, "\nFAILED:\n")
		for _, f := range fails {
			fmt.Fprintf(w, "  - %s\n", f)
		}
		return fmt.Errorf("%d checks failed (above)", len(fails))
	}
	fmt.Fprintf(w, "\nevery check passed\n")
	return nil
}

// lateKill is the share of the reachable pages fetched from which a
// backend kill no longer counts as mid-crawl: the cluster test must see
// the grid lose each node while it still has most of the work to do.
const lateKill = 0.9

// runChecks prints the results of the checks beyond pages lost and work
// done twice (services up, politeness, termination query, dead letters,
// archive) and of the backend kills, and returns a message for each check
// that failed.
func runChecks(w io.Writer, c config, results []epochResult, crashes []string, nodeKills []*nodeKill, series []int,
	totals map[string]float64, dead map[string]int, queues []string, deadErr error, arch archiveResult, archErr error, vhost string) []string {
	var fails []string
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		fails = append(fails, msg)
		fmt.Fprintf(w, "  FAIL %s\n", msg)
	}
	pass := func(format string, args ...any) { fmt.Fprintf(w, "  ok   %s\n", fmt.Sprintf(format, args...)) }
	delay := time.Duration(c.delayMS) * time.Millisecond

	if len(nodeKills) > 0 && len(results) > 0 {
		r := results[0]
		fmt.Fprintf(w, "\ncluster test: %d pages fetched in %s, %.1f pages/s (politeness bound %.0f pages/s); queue retries %.0f, postponed %.0f, dead-lettered %.0f (services' counters over all incarnations)\n",
			r.requests.Pages, r.wall.Round(time.Second), float64(r.requests.Pages)/r.wall.Seconds(), float64(c.hosts)*1000/float64(c.delayMS),
			totals["gridcrawl_queue_retried_total"], totals["gridcrawl_queue_postponed_total"], totals["gridcrawl_queue_dead_lettered_total"])
		fmt.Fprintf(w, "%-8s %-14s %-38s %9s %9s %9s %10s %9s %9s %10s\n", "node", "kill", "chosen", "at fetch", "killed at", "down for", "rejoin in",
			"pages/s", "lowest", "recovered")
		for _, k := range nodeKills {
			if k.killed.IsZero() {
				fmt.Fprintf(w, "%-8s %-14s not killed: the crawl ended before %.0f%% of its pages were fetched\n", "-", k.target, 100*k.at)
				continue
			}
			at := k.killed.Sub(results[0].start).Seconds()
			d := rateDip(series, int(at))
			down, rejoin := "stays", "-"
			if !k.started.IsZero() {
				down, rejoin = k.started.Sub(k.killed).Round(time.Second).String(), k.startTook.Round(time.Second).String()
			}
			rec := "not before the end"
			if d.recovered >= 0 {
				rec = fmt.Sprintf("%ds", d.recovered)
			}
			fmt.Fprintf(w, "%-8s %-14s %-38s %9d %8.0fs %9s %10s %9.1f %9.1f %10s\n", k.node, k.target, k.why, k.fetched, at, down, rejoin, d.baseline, d.lowest, rec)
		}
		fmt.Fprintf(w, "(pages/s: mean over the %d s before the kill; lowest: the lowest %d s mean after it; recovered: from the kill until the %d s mean stays at %.0f%% of the one before for %d s)\n",
			baseWindow, rateWindow, rateWindow, 100*recoveredShare, holdWindow)
	}

	fmt.Fprintf(w, "\nchecks:\n")
	if len(crashes) > 0 {
		fail("%d service exits on their own: %s", len(crashes), strings.Join(crashes, "; "))
	} else {
		pass("every service process stayed up (no exit but the soak's kills)")
	}
	for _, k := range nodeKills {
		switch {
		case k.killed.IsZero():
			fail("backend kill %s at %.0f%% of the pages never happened: the crawl ended first", k.target, 100*k.at)
		case k.startErr != nil:
			fail("node %s did not come back: %v", k.node, k.startErr)
		case !c.noRestart && k.started.IsZero():
			fail("node %s was never started again", k.node)
		case k.share >= lateKill:
			fail("node %s was killed at %.0f%% of the reachable pages fetched, not mid-crawl (%.0f%% at most): the nodes killed before it took too long to rejoin, or the crawl ran too fast for the kills; slow the crawl (-min-delay-ms)",
				k.node, 100*k.share, 100*lateKill)
		}
	}
	for _, r := range results {
		if !r.finished {
			fail("crawl %d (%s) did not finish within -drain %s: %v", r.epoch, r.crawlID, c.drain, r.status.Counts)
			continue
		}
		pass("crawl %d finished after %s", r.epoch, r.wall.Round(time.Second))
		switch {
		case r.pendingErr != nil:
			fail("crawl %d: the termination query failed: %v", r.epoch, r.pendingErr)
		case r.pending != 0:
			fail("crawl %d: MCP says finished but the termination query (docs/operations.md) counts %d records not in a final state", r.epoch, r.pending)
		default:
			pass("crawl %d: the termination query counts 0 records not in a final state, as MCP's finished says", r.epoch)
		}
	}
	for _, r := range results {
		p := r.polite
		if len(p.short) > 0 || r.requests.Overlaps > 0 {
			fail("crawl %d: politeness: %d hosts fetched within less than the delay %s (tolerance %s), %d overlapping requests; shortest gaps: %s",
				r.epoch, len(p.short), delay, gapTolerance, r.requests.Overlaps, strings.Join(p.short[:min(len(p.short), 10)], ", "))
		} else {
			pass("crawl %d: politeness: shortest gap between two requests to one host %s (%s), median of the hosts' shortest %s, over %d hosts; delay %s",
				r.epoch, p.min.Round(time.Millisecond), p.minHost, p.medianMin.Round(time.Millisecond), p.hosts, delay)
		}
	}
	switch {
	case deadErr != nil:
		fail("dead-letter queues could not be read: %v", deadErr)
	case !slices.Contains(queues, contracts.QueueCrawler) || !slices.Contains(queues, contracts.QueueIndex):
		fail("no %s or %s queue in virtual host %s: the dead-letter check sees the wrong broker or virtual host (queues: %v)",
			contracts.QueueCrawler, contracts.QueueIndex, vhost, queues)
	default:
		var full []string
		for q, n := range dead {
			if n > 0 {
				full = append(full, fmt.Sprintf("%s: %d", q, n))
			}
		}
		sort.Strings(full)
		if len(full) > 0 {
			fail("dead-lettered contracts: %s", strings.Join(full, ", "))
		} else {
			pass("nothing dead-lettered: %d dead-letter queues, all empty, beside %d work and delay queues in virtual host %s", len(dead), len(queues), vhost)
		}
	}
	if c.archiveCheck {
		switch {
		case archErr != nil:
			fail("archive check: %v", archErr)
		case len(arch.problems) > 0:
			fail("archive: %d segments (%d MiB), %d CDXJ lines, %d read back: %s", arch.segments, arch.bytes>>20, arch.lines, arch.readBack, strings.Join(arch.problems, "; "))
		case arch.segments == 0 || arch.lines == 0:
			fail("archive: %d segments, %d CDXJ lines: nothing to check", arch.segments, arch.lines)
		default:
			pass("archive: warcio check passes all %d segments in the bucket (%d MiB); all %d CDXJ lines read back from MinIO as response/revisit/resource records of their URL; %d of %d reachable pages have a line",
				arch.segments, arch.bytes>>20, arch.lines, arch.covered, arch.wanted)
		}
	}
	return fails
}

// diskMiB returns the MiB taken by the run's indices and objects, or 0 if
// they cannot be read.
func diskMiB(prefix string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, objs, err1 := bucketBytes(ctx, prefix)
	esURL, err2 := liveES()
	es := int64(0)
	if err2 == nil {
		es, err2 = indicesBytes(esURL, prefix)
	}
	if err1 != nil || err2 != nil {
		return 0
	}
	return (objs + es) >> 20
}

// cleanUp deletes the virtual host, Elasticsearch indices and MinIO bucket
// of the run named name (they share it).
func cleanUp(name string, ctl []string) error {
	if !strings.HasPrefix(name, "gridsoak-") {
		return fmt.Errorf("%q is not the name of a soak run (gridsoak-...)", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, drop := vhostDropper(ctl, name)
	err := drop()
	esURL, esErr := liveES()
	if esErr == nil {
		esErr = deleteIndices(esURL, name)
	}
	return errors.Join(err, esErr, removeBucket(ctx, name))
}

// report prints, per service, the first, last and largest RSS, goroutine
// count and open files, and the trend of each over the second half of the run.
func report(w io.Writer, samples []sample, wall, step float64) {
	by := map[string][]sample{}
	var order []string
	for _, s := range samples {
		if _, ok := by[s.service]; !ok {
			order = append(order, s.service)
		}
		by[s.service] = append(by[s.service], s)
	}
	timeline(w, samples, order, wall, 6)
	from := wall / 2
	warm := math.Max(30, 3*step)
	fmt.Fprintf(w, "\nper service: first / last / max; trend: slope within incarnations over the second half (from %.0fs, leaving out %.0fs after each start) and peak before -> in the last third; GROWING when both rise by more than a tenth and a floor (16 MiB, 20 goroutines, 10 files), check when one does\n", from, warm)
	fmt.Fprintf(w, "%-10s %-4s %-10s %7s %7s %7s %17s %10s  %s\n", "service", "runs", "quantity", "first", "last", "max", "peak before->last", "slope/h", "verdict")
	for _, name := range order {
		ss := by[name]
		var rss, gor, fds []point
		for _, s := range ss {
			rss = append(rss, point{s.t, s.start, float64(s.rssKiB) / 1024})
			if s.goroutines >= 0 {
				gor = append(gor, point{s.t, s.start, float64(s.goroutines)})
			}
			fds = append(fds, point{s.t, s.start, float64(s.fds)})
		}
		for _, q := range []struct {
			name string
			s    series
		}{
			{"rss MiB", summarize(rss, from, wall, warm, 16)},
			{"goroutines", summarize(gor, from, wall, warm, 20)},
			{"open files", summarize(fds, from, wall, warm, 10)},
		} {
			fmt.Fprintf(w, "%-10s %-4d %-10s %7.0f %7.0f %7.0f %17s %+10.1f  %s\n", name, ss[len(ss)-1].incarnation, q.name,
				q.s.first, q.s.last, q.s.max, fmt.Sprintf("%.0f->%.0f", q.s.earlyMax, q.s.lateMax), q.s.perHour, q.s.verdict)
		}
	}
}

// timeline prints each service's RSS (MiB), goroutines and open files at
// cols evenly spaced times of the run: the last sample at or before each,
// with the incarnation when it is not the first ("r2" after one restart).
func timeline(w io.Writer, samples []sample, order []string, wall float64, cols int) {
	fmt.Fprintf(w, "\nover time: rss MiB / goroutines / open files (rN: N-th incarnation)\n%-10s", "service")
	ts := make([]float64, cols)
	for i := range ts {
		ts[i] = wall * float64(i+1) / float64(cols)
		fmt.Fprintf(w, " %17s", fmt.Sprintf("%.0fs", ts[i]))
	}
	fmt.Fprintln(w)
	for _, name := range order {
		fmt.Fprintf(w, "%-10s", name)
		for _, t := range ts {
			var got *sample
			for i := range samples {
				if samples[i].service == name && samples[i].t <= t {
					got = &samples[i]
				}
			}
			cell := "-"
			if got != nil {
				cell = fmt.Sprintf("%.0f/%d/%d", float64(got.rssKiB)/1024, got.goroutines, got.fds)
				if got.incarnation > 1 {
					cell = fmt.Sprintf("r%d %s", got.incarnation, cell)
				}
			}
			fmt.Fprintf(w, " %17s", cell)
		}
		fmt.Fprintln(w)
	}
}

// loadavg returns /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown\n"
	}
	return string(b)
}
