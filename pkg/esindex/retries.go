package esindex

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// Several nodes (Options.URL with commas).
//
// go-elasticsearch (elastic-transport-go v8) keeps the addresses in a
// connection pool and sends each request to the next live one, round robin.
// A request that fails with a network error marks its node dead and is sent
// again to another, up to MaxRetries more times; a dead node is tried again
// after a minute, doubling with each further failure up to 32 minutes, or
// at once when every node is dead. A response with a status of
// RetryOnStatus is sent again too, without marking the node dead. With one
// address the pool has a single connection that is never marked dead, and
// the retries go to it.
//
// A request sent again may have been applied by Elasticsearch the first
// time (the connection broke after the request left, or a proxy answered
// 502 or 504 after forwarding it). Reads do not mind. gridcrawl's writes
// of the transaction index are create operations and index operations
// conditioned on the sequence number and primary term of the version they
// change, so a second application fails with a conflict (409) instead of
// applying twice; and every such write carries a write id (see txdoc.go),
// by which a conflict caused by the write's own first application is told
// from one caused by another writer: the caller learns that its write
// applied, exactly once.

// retryStatuses are the statuses of answers sent again to another node:
// a proxy's bad gateway and gateway timeout, and 503, which a node without
// an elected master, or a shard without an active primary, answers.
var retryStatuses = []int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}

// minRetries is the least number of retries of one request; with more
// nodes, one per node.
const minRetries = 3

// retryBackoff spaces the retries of one request: 50 ms, 100 ms, ...
// up to 1 s, so that a request rides out a master election or a primary's
// promotion (which take a few seconds) instead of failing at once.
func retryBackoff(attempt int) time.Duration {
	return min(time.Duration(attempt)*50*time.Millisecond, time.Second)
}

// clientConfig is the go-elasticsearch configuration of addrs over rt.
func clientConfig(addrs []string, rt http.RoundTripper) elasticsearch.Config {
	return elasticsearch.Config{
		Addresses:     addrs,
		Transport:     &attemptTransport{rt: rt},
		RetryOnStatus: retryStatuses,
		MaxRetries:    max(minRetries, len(addrs)),
		RetryBackoff:  retryBackoff,
		// A request whose context is done is not sent again: every
		// attempt would fail at once and mark another node dead.
		RetryOnError: func(req *http.Request, err error) bool {
			return req.Context().Err() == nil && !errors.Is(err, errMaybeApplied)
		},
	}
}

// attemptsKey keys the *attempts of a request in its context.
type attemptsKey struct{}

// noResendKey marks a context whose requests must not be sent again after
// an attempt that may have been applied (withoutResend).
type noResendKey struct{}

// errMaybeApplied is the error of a request made withoutResend whose
// attempt may have been applied and that was not sent again.
var errMaybeApplied = errors.New("elasticsearch request may have been applied; not sent again")

// withoutResend returns ctx for requests that must not be sent again once
// an attempt may have been applied: such a request fails with
// errMaybeApplied instead, and the caller sends what cannot apply twice.
func withoutResend(ctx context.Context) context.Context {
	return context.WithValue(ctx, noResendKey{}, true)
}

// attempts records what happened to the attempts of one request.
type attempts struct {
	mu sync.Mutex
	n  int
	// lastSure is true when the last attempt surely did not reach
	// Elasticsearch (its connection could not be dialled).
	lastSure bool
	// maybeApplied is true when an attempt but the last may have been
	// applied: an attempt followed one that got a response or failed
	// after its connection was made.
	maybeApplied bool
	// noResend refuses to send the request again when an attempt may have
	// been applied (withoutResend).
	noResend bool
}

// withAttempts returns ctx with a record of the attempts of the request
// sent with it.
func withAttempts(ctx context.Context) (context.Context, *attempts) {
	a := &attempts{noResend: ctx.Value(noResendKey{}) != nil}
	return context.WithValue(ctx, attemptsKey{}, a), a
}

// MaybeApplied reports whether an attempt before the last may have been
// applied.
func (a *attempts) MaybeApplied() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.maybeApplied
}

// attemptTransport records the attempts of requests whose context carries
// an *attempts.
type attemptTransport struct{ rt http.RoundTripper }

func (t *attemptTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	a, _ := req.Context().Value(attemptsKey{}).(*attempts)
	if a != nil {
		a.mu.Lock()
		if a.n > 0 && !a.lastSure {
			a.maybeApplied = true
			if a.noResend {
				a.mu.Unlock()
				return nil, errMaybeApplied
			}
		}
		a.n++
		a.mu.Unlock()
	}
	res, err := t.rt.RoundTrip(req)
	if a != nil {
		a.mu.Lock()
		a.lastSure = err != nil && isDialError(err)
		a.mu.Unlock()
	}
	return res, err
}

// isDialError reports whether err is a failure to connect, after which the
// request was surely not sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// CheckWaitForActiveShards checks a wait_for_active_shards value for
// indices with replicas replicas: empty, "all", or a number from 1 to the
// number of copies (replicas + 1).
func CheckWaitForActiveShards(v string, replicas int) error {
	if v == "" || v == "all" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > replicas+1 {
		return fmt.Errorf("wait_for_active_shards %q: want \"all\" or a number from 1 to %d (replicas + 1)", v, replicas+1)
	}
	return nil
}

// checkSettings compares the shards and replicas of the existing index
// name with those wanted: the number of shards cannot change, and a
// difference is logged as a warning; the number of replicas can, and is
// set when Options.UpdateReplicas asks for it.
func (c *Client) checkSettings(ctx context.Context, name string, shards int) error {
	have, err := c.indexSettings(ctx, name)
	if err != nil {
		return err
	}
	if have.shards != shards {
		c.log.Warn("elasticsearch index has another number of primary shards than configured; it cannot change (reindex to change it)",
			"index", name, "shards", have.shards, "configured", shards)
	}
	if !c.updateReplicas || (have.replicas == c.replicas && have.autoExpand == "") {
		return nil
	}
	return c.setReplicas(ctx, name, have)
}

// indexSettings are the settings of an index that Open checks.
type indexSettings struct {
	shards, replicas int
	// autoExpand is index.auto_expand_replicas, "" when unset or false.
	autoExpand string
}

// indexSettings returns the shard settings of index name.
func (c *Client) indexSettings(ctx context.Context, name string) (indexSettings, error) {
	var res map[string]struct {
		Settings struct {
			Index struct {
				Shards     string `json:"number_of_shards"`
				Replicas   string `json:"number_of_replicas"`
				AutoExpand string `json:"auto_expand_replicas"`
			} `json:"index"`
		} `json:"settings"`
	}
	req := esapi.IndicesGetSettingsRequest{Index: []string{name}}
	if err := c.do(ctx, req, &res); err != nil {
		return indexSettings{}, fmt.Errorf("get settings of index %q: %w", name, err)
	}
	ix, ok := res[name]
	if !ok {
		return indexSettings{}, fmt.Errorf("get settings of index %q: not in the answer", name)
	}
	var s indexSettings
	var err1, err2 error
	s.shards, err1 = strconv.Atoi(ix.Settings.Index.Shards)
	s.replicas, err2 = strconv.Atoi(ix.Settings.Index.Replicas)
	if err := errors.Join(err1, err2); err != nil {
		return indexSettings{}, fmt.Errorf("get settings of index %q: %w", name, err)
	}
	if a := ix.Settings.Index.AutoExpand; a != "false" {
		s.autoExpand = a
	}
	return s, nil
}

// setReplicas sets the configured number of replicas on index name, which
// has have, and turns auto_expand_replicas off.
func (c *Client) setReplicas(ctx context.Context, name string, have indexSettings) error {
	body := fmt.Sprintf(`{"index":{"number_of_replicas":%d,"auto_expand_replicas":false}}`, c.replicas)
	req := esapi.IndicesPutSettingsRequest{Index: []string{name}, Body: strings.NewReader(body)}
	if err := c.do(ctx, req, nil); err != nil {
		return fmt.Errorf("set number_of_replicas of index %q to %d: %w", name, c.replicas, err)
	}
	c.log.Info("changed the number of replicas of an elasticsearch index",
		"index", name, "from", have.replicas, "auto_expand_replicas", have.autoExpand, "to", c.replicas)
	return nil
}
