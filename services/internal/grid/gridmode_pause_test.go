package grid

import (
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// rabbitmqctl runs rabbitmqctl against the local test broker.
func rabbitmqctl(t *testing.T, args ...string) string {
	t.Helper()
	script, err := filepath.Abs("../../../scripts/services/rabbitmq.sh")
	if err != nil {
		t.Fatal(err)
	}
	// The CLI cannot reach a broker that is (re)starting: try a few times.
	var out []byte
	for attempt := 1; ; attempt++ {
		out, err = exec.Command(script, append([]string{"ctl", "rabbitmqctl", "-q"}, args...)...).CombinedOutput()
		if err == nil {
			return string(out)
		}
		if attempt == 5 {
			t.Fatalf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		time.Sleep(3 * time.Second)
	}
}

// ownVhost gives the test a RabbitMQ virtual host of its own, so that the
// cluster's queues hold only its messages (other tests on the same broker
// use the default one), and returns env with GRIDCRAWL_AMQP_URL pointing
// at it.
func ownVhost(t *testing.T, env []string) ([]string, string) {
	t.Helper()
	vhost := "gridtest-" + randSuffix()
	rabbitmqctl(t, "add_vhost", vhost)
	t.Cleanup(func() { rabbitmqctl(t, "delete_vhost", vhost) })
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GRIDCRAWL_AMQP_URL="); ok {
			u, err := url.Parse(v)
			if err != nil {
				t.Fatalf("GRIDCRAWL_AMQP_URL: %v", err)
			}
			rabbitmqctl(t, "set_permissions", "-p", vhost, u.User.Username(), ".*", ".*", ".*")
			u.Path = "/" + vhost
			kv = "GRIDCRAWL_AMQP_URL=" + u.String()
		}
		out = append(out, kv)
	}
	return out, vhost
}

// unackedLoaderContracts returns the messages of vhost's loader queues
// delivered to a consumer and not yet settled. Wait queues are left out:
// their movers hold the message at a wait queue's head until its release,
// by design (pkg/amqpqueue, wait.go), and deliver it to no loader.
func unackedLoaderContracts(t *testing.T, vhost string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(rabbitmqctl(t, "list_queues", "-p", vhost, "--no-table-headers", "name", "messages_unacknowledged"), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || !strings.HasPrefix(f[0], contracts.QueueLoader) || strings.Contains(f[0], ".wait.") {
			continue
		}
		v, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("list_queues line %q: %v", line, err)
		}
		n += v
	}
	return n
}

// TestGridModePauseLongerThanLease pauses a crawl on RabbitMQ for longer than
// the recovery lease times its attempts, then resumes it: no record may
// fail meanwhile, the loaders may not hold the paused crawl's contracts
// unacked, and after the resume the crawl finishes with the whole web.
func TestGridModePauseLongerThanLease(t *testing.T) {
	env := realBackends(t)
	env, vhost := ownVhost(t, env)
	web, starts, want := startWeb(t, websim.WebConfig{Hosts: 4, PagesPerHost: 25, LinksPerPage: 4, CrossHostLinks: 1, Seed: 5}, 2)

	const lease, attempts = 2 * time.Second, 2
	c := newCluster(t, env, web.Resolve())
	c.env = append(c.env, "GRIDCRAWL_RECOVERY_LEASE="+lease.String(), "GRIDCRAWL_RECOVERY_INTERVAL=500ms",
		"GRIDCRAWL_RECOVERY_ATTEMPTS="+strconv.Itoa(attempts))
	c.startAll()
	p := contracts.Profile{StartURLs: starts, MaxDepth: contracts.MaxDepthLimit, Scope: contracts.ScopeDomain, Sitemaps: new(bool), // the oracle is the link graph
		Politeness: contracts.Politeness{MinDelayMS: 200, MaxDelayMS: 200, DelayFactor: 1}}
	id := c.startCrawl(p)
	st := c.waitFetched(id, int64(len(want)/5), "the pause")
	if code := c.do(http.MethodPost, "/api/v1/crawls/"+id+"/pause", nil, nil); code/100 != 2 {
		t.Fatalf("pause = %d", code)
	}
	t.Logf("paused at %v", st.Counts)
	if st.Counts[contracts.ToBeLoaded] == 0 {
		t.Fatalf("nothing left to load at the pause; make the web slower")
	}

	// Pause for longer than the sweep needs to give up on a record, and
	// watch the broker once the loaders have had time to see the pause (the
	// state cache's second, and the fetches in flight): a contract held
	// unacked in five samples in a row (over four seconds) is held, not
	// being parked. A loader that held the paused crawl's contracts would
	// hold them through the whole pause.
	pause := lease*(attempts+1) + 4*time.Second
	const grace = 3 * time.Second
	end := time.Now().Add(pause)
	time.Sleep(grace)
	held := 0
	for ; time.Now().Before(end); time.Sleep(time.Second) {
		n := unackedLoaderContracts(t, vhost)
		if n == 0 {
			held = 0
			continue
		}
		if held++; held == 5 {
			t.Errorf("loaders hold %d contracts of the paused crawl unacked for more than four seconds", n)
		}
	}
	c.do(http.MethodGet, "/api/v1/crawls/"+id, nil, &st)
	if st.State != contracts.CrawlPaused {
		t.Errorf("state after a pause of %v = %s, want paused", pause, st.State)
	}
	if n := st.Counts[contracts.Failed]; n != 0 {
		t.Errorf("%d records failed during the pause: %v", n, st.Counts)
	}

	if code := c.do(http.MethodPost, "/api/v1/crawls/"+id+"/resume", nil, nil); code/100 != 2 {
		t.Fatalf("resume = %d", code)
	}
	for deadline := time.Now().Add(2 * time.Minute); st.State != contracts.CrawlFinished; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("crawl not finished after the resume: %s %v", st.State, st.Counts)
		}
		c.do(http.MethodGet, "/api/v1/crawls/"+id, nil, &st)
	}
	set := c.openBackends(t)
	allIndexed(t, set.Tx, id, want, nil)
}
