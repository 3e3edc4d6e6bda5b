package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
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

	killed    time.Time // zero until killed
	started   time.Time // when cluster.sh start returned successfully; zero until then
	startTook time.Duration
	startErr  error
}

// clusterCmd runs the cluster script with args, for at most timeout, and
// returns its standard output.
func clusterCmd(script string, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", script, strings.Join(args, " "), err, lastLines(errOut.String(), 5))
	}
	return out.String(), nil
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
func chooseNode(script, target, prefix string) (node, why string, err error) {
	var out string
	switch target {
	case "rabbitmq":
		out, err = clusterCmd(script, time.Minute, "leader-node", "rabbitmq")
		why = "holds the most queue leaders"
	case "elasticsearch":
		out, err = clusterCmd(script, time.Minute, "primary-node", "elasticsearch", prefix)
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

// killNode kills -9 the node's server processes (cluster.sh kill returns at
// once).
func killNode(script, node string) error {
	_, err := clusterCmd(script, time.Minute, "kill", node)
	return err
}

// startNode starts the node again and waits until it has rejoined its
// cluster (cluster.sh start), for at most ten minutes.
func startNode(script, node string) error {
	_, err := clusterCmd(script, 10*time.Minute, "start", node)
	return err
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
