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
	esURL := strings.TrimRight(os.Getenv("GRIDCRAWL_ES_URL"), "/")
	amqpURL, _, err := ownVhost(os.Getenv("GRIDCRAWL_AMQP_URL"), prefix)
	if err != nil {
		return fmt.Errorf("own virtual host (concurrent grid runs on one virtual host take each other's contracts): %w", err)
	}
	defer func() {
		if c.keep {
			fmt.Printf("kept: virtual host, indices %s-*, bucket %s\n", prefix, bucket)
			return
		}
		if e := cleanUp(prefix); e != nil {
			fmt.Fprintf(os.Stderr, "soak: clean up: %v\n", e)
		}
	}()
	apiAddr, err := freeAddr()
	if err != nil {
		return err
	}
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
	for _, n := range names {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
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
	var results []epochResult
	var kills []outage
	finish := func(e *epoch, st contracts.CrawlStatus, finished bool) error {
		r, err := check(esURL, prefix+"-web", prefix+"-transactions", e.web, e.want, st, delay, kills)
		e.web.Close()
		if err != nil {
			return fmt.Errorf("check crawl %s: %w", e.id, err)
		}
		r.epoch, r.finished, r.wall = e.n, finished, time.Since(e.start)
		results = append(results, r)
		rec.event("crawl %d %s after %s: %d reachable, %d documents, %d lost, %d fetched more than once, %d stored more than once (%d stores beyond one a document: %d after a depth lowering, %d redone after a kill)",
			e.n, map[bool]string{true: "finished", false: "NOT finished"}[finished], r.wall.Round(time.Second), r.expected, r.documents, r.lost,
			r.requests.FetchedTwice, r.rewritten, r.stores, r.relowered, r.replayed)
		return nil
	}
	// Counters of the services, added up over their incarnations: read
	// just before each kill (what the killed process did since then is not
	// counted) and at the end.
	totals := map[string]float64{}
	addCounters := func(s *service) {
		m, err := counters(s.metrics)
		if err != nil {
			rec.event("counters of %s: %v", s.name, err)
			return
		}
		for k, v := range m {
			totals[k] += v
		}
	}
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
		if st.State == contracts.CrawlFinished && len(pending) == 0 {
			if err := finish(cur, st, true); err != nil {
				return err
			}
			if !c.recrawl || !time.Now().Before(end) {
				break
			}
			if used := diskMiB(esURL, prefix); used > c.maxDiskMiB {
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
	// One last sample of the idle services before they stop.
	rec.take(cl.services, cl.settled())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	objs, objBytes, objErr := bucketBytes(ctx, bucket)
	cancel()
	esBytes, esErr := indicesBytes(esURL, prefix)
	for _, s := range cl.services {
		addCounters(s)
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
	docs := 0
	for _, r := range results {
		docs += r.documents
	}
	fmt.Fprintf(w, "services' own counts over all incarnations (read before each kill and at the end): loader fetched %.0f, republished %.0f (fetched before, crawler contract published again), skipped %.0f; mcp documents stored %.0f (%d documents exist), pages indexed %.0f, recovery sweep republished %.0f\n",
		totals[counterNames[0]], totals[counterNames[1]], totals[counterNames[2]], totals[counterNames[3]], docs, totals[counterNames[4]], totals[counterNames[5]])
	if int64(lost+twiceFetched-refetched+multi+extra+unfinished)+stores-lowered-replayed > 0 {
		return errors.New("the soak found lost, unfinished or duplicated work (above)")
	}
	return nil
}

// diskMiB returns the MiB taken by the run's indices and objects, or 0 if
// they cannot be read.
func diskMiB(esURL, prefix string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, objs, err1 := bucketBytes(ctx, prefix)
	es, err2 := indicesBytes(esURL, prefix)
	if err1 != nil || err2 != nil {
		return 0
	}
	return (objs + es) >> 20
}

// cleanUp deletes the virtual host, Elasticsearch indices and MinIO bucket
// of the run named name (they share it).
func cleanUp(name string) error {
	if !strings.HasPrefix(name, "gridsoak-") {
		return fmt.Errorf("%q is not the name of a soak run (gridsoak-...)", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, drop, err := vhostDropper(os.Getenv("GRIDCRAWL_AMQP_URL"), name)
	if err == nil {
		err = drop()
	}
	return errors.Join(err, deleteIndices(strings.TrimRight(os.Getenv("GRIDCRAWL_ES_URL"), "/"), name), removeBucket(ctx, name))
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
