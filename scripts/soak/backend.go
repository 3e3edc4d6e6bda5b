package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// nodeKill is one kill -9 of a backend node (-backend-kills), planned at a
// share of the crawl's pages fetched.
type nodeKill struct {
	target  string  // as given: a cluster (rabbitmq, elasticsearch, minio) or a node name
	at      float64 // fraction of the reachable pages fetched at which it happens
	node    string  // the node killed, chosen at the kill
	why     string  // how it was chosen
	fetched int     // pages fetched (the web server's count) at the kill
	share   float64 // fetched as a share of the reachable pages

	killed    time.Time // zero until killed
	started   time.Time // when cluster.sh start returned successfully; zero until then
	startTook time.Duration
	startErr  error
}

// clusterCmd runs the cluster script with args, for at most timeout, and
// returns its standard output.
func clusterCmd(script string, timeout time.Duration, args ...string) (string, error) {
	out, errOut, err := runFor(timeout, script, args...)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", script, strings.Join(args, " "), err, lastLines(errOut, 5))
	}
	return out, nil
}

// runFor runs the command for at most timeout and returns its standard
// output and error. It runs in a process group of its own, killed whole at
// the timeout: a shell script's children would otherwise keep its output
// open, and the wait for it, after the script itself was killed.
func runFor(timeout time.Duration, name string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("no answer within %s: %w", timeout, err)
	}
	return out.String(), errOut.String(), err
}

// lastLines returns the last n non-blank lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var ls []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}

// chooseNode returns the node to kill for target: the RabbitMQ node holding
// the most quorum queue leaders, the Elasticsearch node holding the most
// primaries of the run's indices (prefix), the first MinIO node (the first
// endpoint of the list, the one the services talk to until it fails), or
// target itself when it names a node.
func chooseNode(script string, ctl []string, target, prefix string) (node, why string, err error) {
	var out string
	switch target {
	case "rabbitmq":
		// The run's own virtual host first: one rabbitmqctl call, where
		// cluster.sh leader-node lists every virtual host on a node (it
		// took over a minute beside a running crawl on 2 cores).
		if node, n, err := leaderOf(ctl, prefix); err == nil {
			return node, fmt.Sprintf("leads %d of the run's quorum queues", n), nil
		}
		out, err = clusterCmd(script, 5*time.Minute, "leader-node", "rabbitmq")
		why = "holds the most queue leaders"
	case "elasticsearch":
		out, err = clusterCmd(script, 5*time.Minute, "primary-node", "elasticsearch", prefix)
		why = "holds the most primaries of " + prefix + "-*"
	case "minio":
		return "minio1", "first endpoint", nil
	default:
		return target, "named", nil
	}
	if err != nil {
		return "", "", err
	}
	fields := strings.Fields(out)
	if len(fields) == 0 {
		return "", "", fmt.Errorf("%s: no node named for %s", script, target)
	}
	node = fields[len(fields)-1]
	if nodeCluster(node) != target || node == target {
		return "", "", fmt.Errorf("%s named %q for %s, not one of its nodes", script, out, target)
	}
	return node, why, nil
}

// leaderOf returns the short name (rabbit2) of the node leading the most
// quorum queues of the virtual host, and how many it leads.
func leaderOf(ctl []string, vhost string) (string, int, error) {
	out, err := rabbitmqctl(ctl, "list_queues", "-p", vhost, "--no-table-headers", "name", "type", "leader")
	if err != nil {
		return "", 0, err
	}
	count := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || f[1] != "quorum" {
			continue
		}
		// gridcrawl-rabbit2@localhost -> rabbit2
		name := strings.TrimPrefix(strings.SplitN(f[2], "@", 2)[0], "gridcrawl-")
		if nodeCluster(name) == "rabbitmq" && name != "rabbitmq" {
			count[name]++
		}
	}
	best, n := "", 0
	for name, c := range count {
		if c > n || (c == n && name < best) {
			best, n = name, c
		}
	}
	if best == "" {
		return "", 0, fmt.Errorf("no quorum queue leader in virtual host %s", vhost)
	}
	return best, n, nil
}

// killNode kills -9 the node's server processes (cluster.sh kill returns at
// once).
func killNode(script, node string) error {
	_, err := clusterCmd(script, time.Minute, "kill", node)
	return err
}

// startNode starts the node again and waits until it has rejoined its
// cluster (cluster.sh start), for at most ten minutes. The script's log
// (each step with its time) is appended to logPath.
func startNode(script, node, logPath string) error {
	_, errOut, err := runFor(10*time.Minute, script, "start", node)
	if f, ferr := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); ferr == nil {
		fmt.Fprintf(f, "=== %s start %s\n%s", time.Now().UTC().Format(time.RFC3339), node, errOut)
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("%s start %s: %w: %s", script, node, err, lastLines(errOut, 5))
	}
	return nil
}

// pagesFetched counts the requests in the web server's log other than
// robots.txt: the pages fetched so far (a page fetched twice counts twice).
func pagesFetched(web *websim.Web) int {
	n := 0
	for _, r := range web.RequestLog() {
		if r.Path != "/robots.txt" {
			n++
		}
	}
	return n
}
