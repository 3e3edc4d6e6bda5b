package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/assets"
	"github.com/gridcrawl/gridcrawl/pkg/profiles"
	"github.com/gridcrawl/gridcrawl/pkg/queue"
	"github.com/gridcrawl/gridcrawl/pkg/search"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// Check is one readiness check: a backend and how to reach it.
type Check struct {
	// Backend names the backend (queue, txindex, assets, search).
	Backend string
	// Probe returns nil when the backend answers.
	Probe func(ctx context.Context) error
}

// Readiness is the body of /readyz.
type Readiness struct {
	// Status is "ready" or "unready".
	Status string `json:"status"`
	// Failing names the backends that did not answer, sorted; empty when ready.
	Failing []string `json:"failing"`
	// Backends maps every checked backend to "ok" or its error.
	Backends map[string]string `json:"backends"`
}

// probeTimeout bounds one readiness probe.
const probeTimeout = 3 * time.Second

// Ready runs checks concurrently and reports the result.
func Ready(ctx context.Context, checks []Check) Readiness {
	r := Readiness{Status: "ready", Failing: []string{}, Backends: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			err := c.Probe(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				r.Backends[c.Backend] = err.Error()
				r.Failing = append(r.Failing, c.Backend)
				return
			}
			r.Backends[c.Backend] = "ok"
		})
	}
	wg.Wait()
	if len(r.Failing) > 0 {
		r.Status = "unready"
		sort.Strings(r.Failing)
	}
	return r
}

// ReadyHandler serves /readyz: 200 with the Readiness body when every
// check passes, 503 naming the failing backends otherwise.
func ReadyHandler(checks []Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rd := Ready(r.Context(), checks)
		code := http.StatusOK
		if rd.Status != "ready" {
			code = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(rd)
	})
}

// Healthz serves /healthz: the process is alive (it answers).
func Healthz(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }

// Mux returns the handler of a loader's or crawler's metrics listener:
// /metrics, /healthz and /readyz.
func Mux(reg *Registry, checks []Check) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", reg.Handler())
	mux.HandleFunc("GET /healthz", Healthz)
	mux.Handle("GET /readyz", ReadyHandler(checks))
	return mux
}

// Serve serves h on addr until ctx is done. It returns once the listener
// is bound (or failed to bind); the server stops when ctx ends and done is
// closed once it has.
func Serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger) (bound net.Addr, done <-chan struct{}, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen for metrics on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve metrics", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	log.Info("metrics listening", "addr", ln.Addr().String())
	return ln.Addr(), ch, nil
}

// probeKey is a key no backend holds: each probe asks for it.
const probeKey = "gridcrawl-readyz-probe"

// RecordGetter is the part of the transaction index a readiness probe
// asks.
type RecordGetter interface {
	Get(ctx context.Context, key string) (txindex.Record, error)
}

// BackendChecks returns the readiness checks of a service's backends: each
// asks its backend for something that need not exist (a "not found" is an
// answer). Nil backends are not checked.
func BackendChecks(q queue.Queue, tx RecordGetter, ps profiles.Store, as assets.Store, si search.Index) []Check {
	absent := func(err, notFound error) error {
		if err == nil || errors.Is(err, notFound) {
			return nil
		}
		return err
	}
	var cs []Check
	if q != nil {
		cs = append(cs, Check{Backend: "queue", Probe: func(ctx context.Context) error {
			_, err := q.Len(ctx, contracts.QueueIndex)
			return err
		}})
	}
	if tx != nil {
		cs = append(cs, Check{Backend: "txindex", Probe: func(ctx context.Context) error {
			_, err := tx.Get(ctx, probeKey)
			return absent(err, txindex.ErrNotFound)
		}})
	}
	if ps != nil {
		cs = append(cs, Check{Backend: "profiles", Probe: func(ctx context.Context) error {
			_, err := ps.Get(ctx, probeKey)
			return absent(err, profiles.ErrNotFound)
		}})
	}
	if as != nil {
		cs = append(cs, Check{Backend: "assets", Probe: func(ctx context.Context) error {
			rc, err := as.Get(ctx, probeKey, 0, 1)
			if err == nil {
				rc.Close()
			}
			return absent(err, assets.ErrNotFound)
		}})
	}
	if si != nil {
		cs = append(cs, Check{Backend: "search", Probe: func(ctx context.Context) error {
			_, err := si.Get(ctx, probeKey)
			return absent(err, search.ErrNotFound)
		}})
	}
	return cs
}
