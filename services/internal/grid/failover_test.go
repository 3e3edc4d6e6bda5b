package grid

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
)

// startLoaderWithID starts a loader process under name with a fixed
// GRIDCRAWL_LOADER_ID.
func (c *gridCluster) startLoaderWithID(name, id string) {
	c.t.Helper()
	env := c.env
	c.env = append(slices.Clip(env), "GRIDCRAWL_LOADER_ID="+id)
	c.start(name, "loader")
	c.env = env
}

// groupOwner returns the id of the loader whose frontier report holds group,
// or "" when none does yet.
func (c *gridCluster) groupOwner(group string) string {
	c.t.Helper()
	var rep contracts.FrontierReport
	if code := c.do(http.MethodGet, "/api/v1/frontier", nil, &rep); code != http.StatusOK {
		return ""
	}
	for _, l := range rep.Loaders {
		var r struct {
			Groups []struct {
				Group    string `json:"chg"`
				Enqueued int64  `json:"enqueued"`
			} `json:"groups"`
		}
		if json.Unmarshal(l.Report, &r) != nil {
			continue
		}
		for _, g := range r.Groups {
			if g.Group == group && g.Enqueued > 0 {
				return l.LoaderID
			}
		}
	}
	return ""
}

// TestGridModeFailoverKeepsCrawlDelay kills (SIGKILL) the loader that owns a
// host group with a robots.txt Crawl-delay in the middle of its crawl. The
// other loader takes the group over; the server's request log of the host
// must show no two requests, robots.txt included, closer than the delay,
// across the failover too, and the crawl finishes with every page indexed.
func TestGridModeFailoverKeepsCrawlDelay(t *testing.T) {
	testFailoverKeepsCrawlDelay(t, false, func(c *gridCluster, victim, _ string) {
		c.stop(victim, syscall.SIGKILL)
	})
}

// TestGridModeFrontierFailover is the kill of the owner with loaders that
// file URLs in frontier stores of their own (GRIDCRAWL_LOADER_FRONTIER_DIR):
// the other loader claims the dead one's shards once their leases expire,
// rebuilds their frontiers from the transaction index, and fetches the
// rest, keeping the delay, with every page fetched once.
func TestGridModeFrontierFailover(t *testing.T) {
	testFailoverKeepsCrawlDelay(t, true, func(c *gridCluster, victim, _ string) {
		c.stop(victim, syscall.SIGKILL)
	})
}

// TestGridModeConnectionLossKeepsCrawlDelay closes the broker connection of
// the loader that owns the group instead, as a broker failure would (a
// RabbitMQ 541 INTERNAL_ERROR did it in a test run). The loader lives on and
// reconnects, but the broker has handed its unsettled contracts to the other
// loader: it must not fetch their URLs any more, or two loaders fetch the
// group at once.
func TestGridModeConnectionLossKeepsCrawlDelay(t *testing.T) {
	testFailoverKeepsCrawlDelay(t, false, func(c *gridCluster, _, loaderID string) {
		closeConnections(c.t, c.envValue("GRIDCRAWL_AMQP_URL"), "gridcrawl-loader-"+loaderID)
	})
}

// closeConnections closes, with rabbitmqctl, the broker connections named
// connName in the virtual host of amqpURL, and fails the test if there is
// none.
func closeConnections(t *testing.T, amqpURL, connName string) {
	t.Helper()
	u, err := url.Parse(amqpURL)
	if err != nil {
		t.Fatalf("GRIDCRAWL_AMQP_URL: %v", err)
	}
	vhost := strings.TrimPrefix(u.Path, "/")
	closed := 0
	for _, line := range strings.Split(rabbitmqctl(t, "list_connections", "pid", "vhost", "client_properties"), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 || f[1] != vhost || !strings.Contains(f[2], `"`+connName+`"`) {
			continue
		}
		rabbitmqctl(t, "close_connection", f[0], "closed by gridcrawl test")
		closed++
	}
	if closed == 0 {
		t.Fatalf("no broker connection named %q in vhost %q", connName, vhost)
	}
}

// testFailoverKeepsCrawlDelay crawls a host with a Crawl-delay and another
// one with two loaders, calls cut with the name and id of the loader that
// owns the slow host's group right after one of its requests, and checks
// that the crawl finishes with no two requests to the slow host closer than
// the delay and some of them after the cut.
func testFailoverKeepsCrawlDelay(t *testing.T, filed bool, cut func(c *gridCluster, victim, loaderID string)) {
	env := realBackends(t)
	env, _ = ownVhost(t, env)
	const slow = "slow.polite.test"
	const delay = time.Second
	hosts := []string{slow, "fast.polite.test"}
	site := newPoliteSite(t, hosts, map[string]string{slow: "User-agent: *\nCrawl-delay: 1\n"})

	c := newCluster(t, env, "*.polite.test=127.0.0.1")
	c.env = append(c.env, "GRIDCRAWL_FRONTIER_REPORT_INTERVAL=200ms")
	c.start("mcp", "mcp")
	ids := map[string]string{"failover-loader-a": "loader-1", "failover-loader-b": "loader-2"}
	for id, name := range ids {
		env := c.env
		c.env = append(slices.Clip(env), "GRIDCRAWL_AMQP_CONNECTION_NAME=gridcrawl-loader-"+id)
		if filed {
			c.env = append(c.env, "GRIDCRAWL_LOADER_FRONTIER_DIR="+t.TempDir(), "GRIDCRAWL_LOADER_SHARD_LEASE=3s")
		}
		c.startLoaderWithID(name, id)
		c.env = env
	}
	c.start("crawler-1", "crawler")

	p := contracts.Profile{StartURLs: []string{site.url(slow, "/"), site.url("fast.polite.test", "/")}, MaxDepth: 2, Scope: contracts.ScopeDomain,
		Politeness: contracts.Politeness{MinDelayMS: 100, MaxDelayMS: 100, DelayFactor: 1}}
	var created contracts.CreateCrawlResponse
	if code := c.do(http.MethodPost, "/api/v1/crawls", p, &created); code != http.StatusCreated {
		t.Fatalf("POST crawl = %d", code)
	}
	slowRequests := func() []fetchRecord {
		site.mu.Lock()
		defer site.mu.Unlock()
		var out []fetchRecord
		for _, r := range site.records {
			if r.host == slow {
				out = append(out, r)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
		return out
	}
	owner := ""
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if owner == "" {
			owner = c.groupOwner(slow)
		}
		if owner != "" && len(slowRequests()) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: owner %q, %d requests to %s", owner, len(slowRequests()), slow)
		}
	}
	// Cut right after a request to the group, when the owner's wait has
	// just begun: a new owner that forgot it would fetch at once.
	for n := len(slowRequests()); len(slowRequests()) == n; time.Sleep(2 * time.Millisecond) {
	}
	victim, ok := ids[owner]
	if !ok {
		t.Fatalf("group %s owned by unknown loader %q", slow, owner)
	}
	cutAt := time.Now()
	cut(c, victim, owner)
	t.Logf("cut %s (%s), the owner of %s, after %d of its requests", victim, owner, slow, len(slowRequests()))

	var st contracts.CrawlStatus
	for deadline := time.Now().Add(2 * time.Minute); st.State != contracts.CrawlFinished; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("crawl not finished after the failover: %s %v", st.State, st.Counts)
		}
		c.do(http.MethodGet, "/api/v1/crawls/"+created.CrawlID, nil, &st)
	}
	if want := int64(len(hosts) * (politePages + 1)); st.Counts[contracts.Indexed] != want {
		t.Errorf("indexed = %d, want %d: %v", st.Counts[contracts.Indexed], want, st.Counts)
	}
	rs := slowRequests()
	after := 0
	for i := 1; i < len(rs); i++ {
		if !rs[i].start.Before(cutAt) {
			after++
		}
		gap := rs[i].start.Sub(rs[i-1].end)
		if gap >= delay {
			continue
		}
		where := "from one loader"
		if rs[i-1].start.Before(cutAt) && !rs[i].start.Before(cutAt) {
			where = "across the failover"
		}
		t.Errorf("%s%s came %v after %s%s (%s), want at least %v", slow, rs[i].path, gap.Round(time.Millisecond), slow, rs[i-1].path, where, delay)
	}
	if after == 0 {
		t.Errorf("no request to %s after the cut: the failover was not exercised", slow)
	}
	if filed {
		// Fetched twice: at most the one request in flight at the kill.
		seen, twice := map[string]int{}, 0
		site.mu.Lock()
		for _, r := range site.records {
			if r.path == "/robots.txt" {
				continue
			}
			if seen[r.host+r.path]++; seen[r.host+r.path] == 2 {
				twice++
			}
		}
		site.mu.Unlock()
		if twice > 1 {
			t.Errorf("%d pages fetched twice, want at most the one in flight at the kill", twice)
		}
		// The survivor rebuilt the dead owner's shard from the index.
		rebuilt := 0
		for name := range c.procs {
			if name == victim || !strings.HasPrefix(name, "loader") {
				continue
			}
			b, _ := os.ReadFile(filepath.Join(c.logs, name+".log"))
			for _, line := range strings.Split(string(b), "\n") {
				var e struct {
					Msg  string `json:"msg"`
					URLs int    `json:"urls"`
				}
				if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "rebuilt the frontier of a loader shard" {
					rebuilt += e.URLs
				}
			}
		}
		if rebuilt == 0 {
			t.Errorf("the surviving loader rebuilt no URL of the dead one's shards: the frontier was not exercised")
		}
		t.Logf("the survivor rebuilt %d URLs", rebuilt)
	}
	t.Logf("%d requests to %s, %d after the cut", len(rs), slow, after)
}
