package mcp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/esindex"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/services/internal/coordinator"
	"github.com/gridcrawl/gridcrawl/services/internal/wire"
)

// txBackends makes fresh transaction indices: the embedded one, and
// Elasticsearch's when GRIDCRAWL_ES_URL is set (required in CI and with
// GRIDCRAWL_REQUIRE_BACKENDS=1).
func txBackends() []struct {
	name string
	new  func(t *testing.T) txindex.Index
} {
	return []struct {
		name string
		new  func(t *testing.T) txindex.Index
	}{
		{"embedded", func(t *testing.T) txindex.Index {
			tx, err := sqlitestore.OpenTxIndex(filepath.Join(t.TempDir(), "tx.db"))
			if err != nil {
				t.Fatalf("OpenTxIndex: %v", err)
			}
			t.Cleanup(func() { _ = tx.Close() })
			return tx
		}},
		{"elasticsearch", func(t *testing.T) txindex.Index {
			c, err := esindex.Open(context.Background(), esindex.Options{URL: testESURL(t),
				Prefix: "gctest-" + strings.ToLower(rand.Text()[:12]), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatalf("open elasticsearch: %v", err)
			}
			t.Cleanup(func() {
				if err := c.DeleteIndices(context.Background()); err != nil {
					t.Errorf("delete indices: %v", err)
				}
				c.Close()
			})
			return c.TxIndex()
		}},
	}
}

// TestOutOfWorkOnStores applies the termination rule to the counts of real
// transaction indices: a crawl with a record in each status is out of work
// only once its last pending record (whichever status it is in) is
// terminal.
func TestOutOfWorkOnStores(t *testing.T) {
	pending := []contracts.Status{contracts.ToBeLoaded, contracts.ToBeParsed, contracts.ToBeIndexed}
	settle := map[contracts.Status]contracts.Status{
		contracts.ToBeLoaded: contracts.Failed, contracts.ToBeParsed: contracts.Failed, contracts.ToBeIndexed: contracts.Indexed,
	}
	for _, b := range txBackends() {
		t.Run(b.name, func(t *testing.T) {
			tx := b.new(t)
			for _, last := range pending {
				t.Run("last "+string(last), func(t *testing.T) {
					crawl := "ow-" + rand.Text()
					now := time.Now().UTC()
					keys := map[contracts.Status]string{}
					var recs []txindex.Record
					for _, s := range contracts.Statuses {
						u := "http://example.test/" + string(s)
						keys[s] = txindex.Key(crawl, u)
						recs = append(recs, txindex.Record{Key: keys[s], CrawlID: crawl, URL: u, Host: "example.test", Group: "example.test",
							Status: s, StatusTime: now, CreatedAt: now})
					}
					if _, err := tx.Create(t.Context(), recs); err != nil {
						t.Fatal(err)
					}
					left := map[contracts.Status]bool{}
					for _, s := range pending {
						left[s] = true
					}
					check := func(when string) {
						t.Helper()
						counts, err := tx.Counts(t.Context(), crawl)
						if err != nil {
							t.Fatal(err)
						}
						if got, want := coordinator.OutOfWork(counts), len(left) == 0; got != want {
							t.Errorf("%s: outOfWork(%v) = %v, want %v (pending: %v)", when, counts, got, want, left)
						}
					}
					check("a record in every status")
					order := append([]contracts.Status{}, pending...)
					for i, s := range order {
						if s == last {
							order = append(append(order[:i:i], order[i+1:]...), last)
							break
						}
					}
					for _, s := range order {
						applied, err := tx.Transition(t.Context(), []txindex.Transition{{Key: keys[s], From: s, To: settle[s]}})
						if err != nil || !applied[0] {
							t.Fatalf("settle the %s record: applied %v, %v", s, applied, err)
						}
						delete(left, s)
						check("after settling the " + string(s) + " record")
					}
				})
			}
		})
	}
}

// lockedBuffer is a log destination for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// stateChanges returns the "crawl state changed" log entries of crawl id as
// "from→to".
func (l *lockedBuffer) stateChanges(t *testing.T, id string) []string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	for sc.Scan() {
		var e struct {
			Msg, CrawlID, From, To, Reason string
		}
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		e.Msg, _ = raw["msg"].(string)
		e.CrawlID, _ = raw["crawl_id"].(string)
		e.From, _ = raw["from"].(string)
		e.To, _ = raw["to"].(string)
		e.Reason, _ = raw["reason"].(string)
		if e.Msg == "crawl state changed" && e.CrawlID == id {
			if e.Reason == "" {
				t.Errorf("state change %s→%s of %s logged without a reason", e.From, e.To, id)
			}
			out = append(out, e.From+"→"+e.To)
		}
	}
	return out
}

// lifecycleMCP is an MCP on embedded backends, serving its API, with
// nothing consuming its queues: the tests move records themselves.
type lifecycleMCP struct {
	m   *MCP
	co  *coordinator.Coordinator
	set *wire.Set
	api string
	log *lockedBuffer
}

// testConfig configures MCP and its coordinator in tests.
type testConfig struct {
	Config
	coConfig
}

type coConfig = coordinator.Config

func newLifecycleMCP(t *testing.T, cfg testConfig) *lifecycleMCP {
	t.Helper()
	return newLifecycleMCPOn(t, cfg, wire.Backends{DataDir: t.TempDir(), QueueMaxAttempts: 5})
}

// storeBackends are the stores an API test runs on: the embedded ones, and
// Elasticsearch for the transaction index, profiles and search when
// GRIDCRAWL_ES_URL is set (required in CI and with
// GRIDCRAWL_REQUIRE_BACKENDS=1); the queue stays embedded.
func storeBackends() []struct {
	name string
	new  func(t *testing.T) wire.Backends
} {
	return []struct {
		name string
		new  func(t *testing.T) wire.Backends
	}{
		{"embedded", func(t *testing.T) wire.Backends { return wire.Backends{DataDir: t.TempDir(), QueueMaxAttempts: 5} }},
		{"elasticsearch", func(t *testing.T) wire.Backends {
			b := wire.Backends{DataDir: t.TempDir(), QueueMaxAttempts: 5, ESURL: testESURL(t),
				ESPrefix: "gctest-" + strings.ToLower(rand.Text()[:12])}
			t.Cleanup(func() {
				c, err := esindex.Open(context.Background(), esindex.Options{URL: b.ESURL, Prefix: b.ESPrefix, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Errorf("open elasticsearch to delete the test's indices: %v", err)
					return
				}
				defer c.Close()
				if err := c.DeleteIndices(context.Background()); err != nil {
					t.Errorf("delete indices: %v", err)
				}
			})
			return b
		}},
	}
}

// newLifecycleMCPOn serves MCP and its coordinator on the backends b.
func newLifecycleMCPOn(t *testing.T, cfg testConfig, b wire.Backends) *lifecycleMCP {
	t.Helper()
	logs := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	set, err := wire.Open(t.Context(), b, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Close() })
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if err := errors.Join(cfg.Config.Validate(true), cfg.coConfig.Validate()); err != nil {
		t.Fatal(err)
	}
	co := coordinator.New(cfg.coConfig, coordinator.Deps{Queue: set.Queue, Tx: set.Tx, Profiles: set.Profiles, Search: set.Search,
		Assets: set.Assets, Logger: log})
	m := New(cfg.Config, Deps{Crawls: co, Queue: set.Queue, Tx: set.Tx, Profiles: set.Profiles, Search: set.Search, Assets: set.Assets, HCF: set.HCF,
		Embedded: true, Logger: log})
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	return &lifecycleMCP{m: m, co: co, set: set, api: srv.URL + "/api/v1/crawls", log: logs}
}

func lifecycleConfig() testConfig {
	return testConfig{coConfig: coConfig{RecoveryLease: time.Second, RecoveryInterval: time.Hour, RecoveryAttempts: 2, FinishCheckInterval: time.Hour,
		DueCheckInterval: time.Hour, MaxDuePerCheck: 10000}}
}

// create makes a running crawl of the start URLs (or one URL of its own).
func (l *lifecycleMCP) create(t *testing.T, p contracts.Profile) string {
	t.Helper()
	if len(p.StartURLs) == 0 {
		p.StartURLs = []string{"http://a.test/" + strings.ToLower(rand.Text()[:8])}
	}
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	id, err := l.co.CreateCrawl(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// do sends a request to the crawl's API and returns the status code, and
// the body decoded into out when it is not nil.
func (l *lifecycleMCP) do(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, l.api+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode: %v", method, path, err)
		}
	}
	return res.StatusCode
}

// records returns the crawl's records by key.
func (l *lifecycleMCP) records(t *testing.T, id string) map[string]txindex.Record {
	t.Helper()
	recs, err := l.set.Tx.List(t.Context(), id, "", "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]txindex.Record{}
	for _, r := range recs {
		out[r.Key] = r
	}
	return out
}

// settle moves every pending record of the crawl through the pipeline to
// indexed, as loader, crawler and indexer would.
func (l *lifecycleMCP) settle(t *testing.T, id string) {
	t.Helper()
	for _, r := range l.records(t, id) {
		steps := []contracts.Status{contracts.ToBeLoaded, contracts.ToBeParsed, contracts.ToBeIndexed, contracts.Indexed}
		for i := 0; i+1 < len(steps); i++ {
			if _, err := l.set.Tx.Transition(t.Context(), []txindex.Transition{{Key: r.Key, From: steps[i], To: steps[i+1]}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (l *lifecycleMCP) state(t *testing.T, id string) contracts.CrawlState {
	t.Helper()
	c, err := l.set.Profiles.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c.State
}

// TestVerbsOverStates walks every API verb over every crawl state and
// checks the answer, the resulting state, the profile version and the
// logged state changes against the lifecycle table.
func TestVerbsOverStates(t *testing.T) {
	l := newLifecycleMCP(t, lifecycleConfig())
	const (
		running   = contracts.CrawlRunning
		paused    = contracts.CrawlPaused
		finished  = contracts.CrawlFinished
		cancelled = contracts.CrawlCancelled
	)
	// into brings a new crawl into a state the way a user and the work do.
	into := map[contracts.CrawlState]func(t *testing.T, id string){
		running: func(t *testing.T, id string) {},
		paused: func(t *testing.T, id string) {
			if code := l.do(t, http.MethodPost, "/"+id+"/pause", nil, nil); code != http.StatusOK {
				t.Fatalf("pause = %d", code)
			}
		},
		finished: func(t *testing.T, id string) {
			l.settle(t, id)
			if _, err := l.co.CheckFinished(t.Context()); err != nil {
				t.Fatal(err)
			}
		},
		cancelled: func(t *testing.T, id string) {
			if code := l.do(t, http.MethodDelete, "/"+id, nil, nil); code != http.StatusOK {
				t.Fatalf("DELETE = %d", code)
			}
		},
	}
	patch := map[string]any{"politeness": map[string]any{"min_delay_ms": 123, "max_delay_ms": 4567}}
	same := map[string]any{"politeness": map[string]any{"min_delay_ms": contracts.DefaultPoliteness().MinDelayMS}}
	type verbCase struct {
		method, path string
		body         any
	}
	verbs := map[string]verbCase{
		"GET":      {http.MethodGet, "", nil},
		"DELETE":   {http.MethodDelete, "", nil},
		"PATCH":    {http.MethodPatch, "", patch},
		"PATCH {}": {http.MethodPatch, "", map[string]any{}},
		// A patch that changes no setting: no new version.
		"PATCH same": {http.MethodPatch, "", same},
		"pause":      {http.MethodPost, "/pause", nil},
		"resume":     {http.MethodPost, "/resume", nil},
	}
	type want struct {
		code    int
		state   contracts.CrawlState
		version int
	}
	// The lifecycle table (README): the answer and resulting state of each
	// verb in each state.
	table := map[contracts.CrawlState]map[string]want{
		running: {
			"GET": {200, running, 0}, "DELETE": {200, cancelled, 0}, "PATCH": {200, running, 1}, "PATCH {}": {400, running, 0}, "PATCH same": {200, running, 0},
			"pause": {200, paused, 0}, "resume": {200, running, 0},
		},
		paused: {
			"GET": {200, paused, 0}, "DELETE": {200, cancelled, 0}, "PATCH": {200, paused, 1}, "PATCH {}": {400, paused, 0}, "PATCH same": {200, paused, 0},
			"pause": {200, paused, 0}, "resume": {200, running, 0},
		},
		finished: {
			"GET": {200, finished, 0}, "DELETE": {409, finished, 0}, "PATCH": {409, finished, 0}, "PATCH {}": {400, finished, 0}, "PATCH same": {409, finished, 0},
			"pause": {409, finished, 0}, "resume": {409, finished, 0},
		},
		cancelled: {
			"GET": {200, cancelled, 0}, "DELETE": {200, cancelled, 0}, "PATCH": {409, cancelled, 0}, "PATCH {}": {400, cancelled, 0}, "PATCH same": {409, cancelled, 0},
			"pause": {409, cancelled, 0}, "resume": {409, cancelled, 0},
		},
	}
	for _, from := range []contracts.CrawlState{running, paused, finished, cancelled} {
		for _, name := range []string{"GET", "DELETE", "PATCH", "PATCH {}", "PATCH same", "pause", "resume"} {
			t.Run(fmt.Sprintf("%s %s", name, from), func(t *testing.T) {
				w, v := table[from][name], verbs[name]
				id := l.create(t, contracts.Profile{})
				into[from](t, id)
				if got := l.state(t, id); got != from {
					t.Fatalf("crawl brought into %s is %s", from, got)
				}
				before := len(l.log.stateChanges(t, id))
				var body json.RawMessage
				code := l.do(t, v.method, "/"+id+v.path, v.body, &body)
				if code != w.code {
					t.Errorf("%s %s crawl = %d %s, want %d", name, from, code, body, w.code)
				}
				var st contracts.CrawlStatus
				if code == http.StatusOK {
					if err := json.Unmarshal(body, &st); err != nil || st.State != w.state {
						t.Errorf("%s %s crawl: body state %q (%v), want %s", name, from, st.State, err, w.state)
					}
				} else {
					var e contracts.ErrorResponse
					if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
						t.Errorf("%s %s crawl: error body %s, want an error message", name, from, body)
					}
				}
				c, err := l.set.Profiles.Get(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				if c.State != w.state || c.Profile.Version != w.version {
					t.Errorf("%s %s crawl: stored %s version %d, want %s version %d", name, from, c.State, c.Profile.Version, w.state, w.version)
				}
				if ended := w.state == finished || w.state == cancelled; ended != (c.FinishedAt != nil) {
					t.Errorf("%s %s crawl: finished at %v in state %s", name, from, c.FinishedAt, c.State)
				}
				changes := l.log.stateChanges(t, id)[before:]
				var wantChanges []string
				if w.state != from {
					wantChanges = []string{string(from) + "→" + string(w.state)}
				}
				if strings.Join(changes, " ") != strings.Join(wantChanges, " ") {
					t.Errorf("%s %s crawl: logged state changes %q, want %q", name, from, changes, wantChanges)
				}
				if w.state == cancelled {
					for _, r := range l.records(t, id) {
						if r.Status.Pending() {
							t.Errorf("cancelled crawl: record %s is %s", r.URL, r.Status)
						}
					}
				}
			})
		}
	}
}

// TestStatusOnlyReads checks that reading an out-of-work crawl does not end
// it: the finish check does, finished or paused at finish.
func TestStatusOnlyReads(t *testing.T) {
	l := newLifecycleMCP(t, lifecycleConfig())
	plain := l.create(t, contracts.Profile{})
	atFinish := l.create(t, contracts.Profile{Budget: &contracts.Budget{PauseAtFinish: true}})
	busy := l.create(t, contracts.Profile{})
	l.settle(t, plain)
	l.settle(t, atFinish)
	for _, id := range []string{plain, atFinish, busy} {
		var st contracts.CrawlStatus
		if code := l.do(t, http.MethodGet, "/"+id, nil, &st); code != http.StatusOK || st.State != contracts.CrawlRunning {
			t.Errorf("GET %s = %d %s, want 200 running", id, code, st.State)
		}
		var list contracts.CrawlList
		l.do(t, http.MethodGet, "", nil, &list)
		if got := l.state(t, id); got != contracts.CrawlRunning {
			t.Errorf("crawl %s after GET = %s, want still running (a read decides nothing)", id, got)
		}
	}
	n, err := l.co.CheckFinished(t.Context())
	if err != nil || n != 2 {
		t.Errorf("CheckFinished = %d, %v, want 2 crawls ended", n, err)
	}
	for id, want := range map[string]contracts.CrawlState{plain: contracts.CrawlFinished, atFinish: contracts.CrawlPaused, busy: contracts.CrawlRunning} {
		if got := l.state(t, id); got != want {
			t.Errorf("crawl %s after the finish check = %s, want %s", id, got, want)
		}
	}
	// Resuming a crawl paused at finish with nothing to do pauses it again
	// at the next check.
	if code := l.do(t, http.MethodPost, "/"+atFinish+"/resume", nil, nil); code != http.StatusOK {
		t.Errorf("resume = %d", code)
	}
	if _, err := l.co.CheckFinished(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := l.state(t, atFinish); got != contracts.CrawlPaused {
		t.Errorf("resumed crawl with nothing to do = %s, want paused again", got)
	}
}

// TestSweepLeavesPausedCrawls runs more recovery passes than the attempts
// allow over a paused, a running and a cancelled crawl: the paused crawl's
// records keep their status and attempts, the running crawl's stall out
// (which shows the passes acted), and the cancelled crawl's fail as
// cancelled. After resume, the sweep recovers the crawl's records again.
func TestSweepLeavesPausedCrawls(t *testing.T) {
	cfg := lifecycleConfig()
	l := newLifecycleMCP(t, cfg)
	many := func(prefix string) []string {
		var us []string
		for i := range 3 {
			us = append(us, fmt.Sprintf("http://%s.test/%d", prefix, i))
		}
		return us
	}
	paused := l.create(t, contracts.Profile{StartURLs: many("paused")})
	running := l.create(t, contracts.Profile{StartURLs: many("running")})
	cancelled := l.create(t, contracts.Profile{StartURLs: many("cancelled")})
	if code := l.do(t, http.MethodPost, "/"+paused+"/pause", nil, nil); code != http.StatusOK {
		t.Fatalf("pause = %d", code)
	}
	if code := l.do(t, http.MethodDelete, "/"+cancelled, nil, nil); code != http.StatusOK {
		t.Fatalf("DELETE = %d", code)
	}
	// A record written after the cancel, as by a crawler that had not seen it.
	now := time.Now().UTC()
	late := txindex.Record{Key: txindex.Key(cancelled, "http://cancelled.test/late"), CrawlID: cancelled, URL: "http://cancelled.test/late",
		Host: "cancelled.test", Group: "cancelled.test", Status: contracts.ToBeLoaded, StatusTime: now, CreatedAt: now}
	if _, err := l.set.Tx.Create(t.Context(), []txindex.Record{late}); err != nil {
		t.Fatal(err)
	}
	before := l.records(t, paused)
	for pass := range cfg.RecoveryAttempts + 2 {
		time.Sleep(cfg.RecoveryLease + 50*time.Millisecond) // every pending record is past its lease
		if _, err := l.co.Sweep(t.Context()); err != nil {
			t.Fatalf("sweep %d: %v", pass, err)
		}
	}
	for k, r := range l.records(t, paused) {
		if r.Status != before[k].Status || r.Attempts != 0 || r.Error != "" {
			t.Errorf("paused crawl's %s = %s attempts %d error %q, want %s attempts 0", r.URL, r.Status, r.Attempts, r.Error, before[k].Status)
		}
	}
	for _, r := range l.records(t, running) {
		if r.Status != contracts.Failed || !strings.HasPrefix(r.Error, "stalled") {
			t.Errorf("running crawl's %s = %s %q, want failed as stalled", r.URL, r.Status, r.Error)
		}
	}
	if r := l.records(t, cancelled)[late.Key]; r.Status != contracts.Failed || r.Error != "cancelled" {
		t.Errorf("cancelled crawl's late record = %s %q, want failed as cancelled", r.Status, r.Error)
	}
	if code := l.do(t, http.MethodPost, "/"+paused+"/resume", nil, nil); code != http.StatusOK {
		t.Fatalf("resume = %d", code)
	}
	time.Sleep(cfg.RecoveryLease + 50*time.Millisecond)
	if _, err := l.co.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, r := range l.records(t, paused) {
		if r.Status != contracts.ToBeLoaded || r.Attempts != 1 {
			t.Errorf("resumed crawl's %s = %s attempts %d, want to-be-loaded with 1 recovery attempt", r.URL, r.Status, r.Attempts)
		}
	}
	if got := l.state(t, paused); got != contracts.CrawlRunning {
		t.Errorf("resumed crawl = %s, want running", got)
	}
}

// TestConcurrentVerbs races pause, resume and cancel of one crawl: whatever
// the interleaving, the crawl ends cancelled, every answer is 200 or 409,
// and exactly one cancel is logged.
func TestConcurrentVerbs(t *testing.T) {
	l := newLifecycleMCP(t, lifecycleConfig())
	id := l.create(t, contracts.Profile{})
	paths := []struct{ method, path string }{
		{http.MethodPost, "/pause"}, {http.MethodPost, "/resume"}, {http.MethodDelete, ""},
	}
	var wg sync.WaitGroup
	codes := make([]int, 24)
	for i := range codes {
		p := paths[i%len(paths)]
		wg.Go(func() { codes[i] = l.do(t, p.method, "/"+id+p.path, nil, nil) })
	}
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusOK && code != http.StatusConflict {
			t.Errorf("request %d (%v) = %d, want 200 or 409", i, paths[i%len(paths)], code)
		}
	}
	if got := l.state(t, id); got != contracts.CrawlCancelled {
		t.Errorf("crawl = %s, want cancelled", got)
	}
	// Log lines of concurrent requests may interleave, so the check is on
	// the set of changes: each one allowed, and one cancel.
	allowed := map[string]bool{"running→paused": true, "paused→running": true, "running→cancelled": true, "paused→cancelled": true}
	cancels := 0
	for _, c := range l.log.stateChanges(t, id) {
		if !allowed[c] {
			t.Errorf("state change %s logged", c)
		}
		if strings.HasSuffix(c, "→cancelled") {
			cancels++
		}
	}
	if cancels != 1 {
		t.Errorf("%d changes to cancelled logged, want 1", cancels)
	}
}
