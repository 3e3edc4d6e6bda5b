package wire

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/sqlitestore"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/txindex/txindextest"
	"github.com/gridcrawl/gridcrawl/services/internal/metrics"
)

// openTx opens an embedded transaction index in t's temporary directory,
// closed when t ends.
func openTx(t *testing.T) *sqlitestore.TxIndex {
	t.Helper()
	tx, err := sqlitestore.OpenTxIndex(filepath.Join(t.TempDir(), "tx.db"))
	if err != nil {
		t.Fatalf("OpenTxIndex: %v", err)
	}
	t.Cleanup(func() { tx.Close() })
	return tx
}

// TestMeteredTxConformance runs the transaction index suite through the
// metrics wrappers: they forward every call as it was made. The pipeline
// part alone passes the pipeline section.
func TestMeteredTxConformance(t *testing.T) {
	t.Run("Index", func(t *testing.T) {
		txindextest.Run(t, txindextest.Harness[txindex.Index]{
			New: func(t *testing.T) txindex.Index { return newMeteredTx(openTx(t), metrics.New().Backend()) },
		})
	})
	t.Run("PipelineAlone", func(t *testing.T) {
		txindextest.RunPipeline(t, txindextest.Harness[*meteredPipeline]{
			New: func(t *testing.T) *meteredPipeline {
				b := metrics.New().Backend()
				return newMeteredPipeline(openTx(t), func(name string) metrics.Op { return b.Op("txindex", name) })
			},
		})
	})
}

// TestMeteredTxTimesEveryOperation calls each method of the index once
// through the wrapper and expects one timed operation of each name, and
// an error counted only for the call that failed (a Get of an absent key
// is an answer, not an error).
func TestMeteredTxTimesEveryOperation(t *testing.T) {
	reg := metrics.New()
	x := newMeteredTx(openTx(t), reg.Backend())
	ctx := t.Context()
	now := time.Now().UTC()
	r := txindex.Record{Key: txindex.Key("c", "http://a.example/"), CrawlID: "c", URL: "http://a.example/", Host: "a.example",
		Group: "a.example", Status: contracts.ToBeLoaded, StatusTime: now, CreatedAt: now}
	calls := []struct {
		op   string
		call func() error
	}{
		{"create", func() error { _, err := x.Create(ctx, []txindex.Record{r}); return err }},
		{"get", func() error {
			if _, err := x.Get(ctx, "absent"); !errors.Is(err, txindex.ErrNotFound) {
				return fmt.Errorf("Get(absent) = %v, want ErrNotFound", err)
			}
			return nil
		}},
		{"get-many", func() error { _, err := x.GetMany(ctx, []string{r.Key}); return err }},
		{"peek", func() error { _, err := x.Peek(ctx, []string{r.Key}); return err }},
		{"transition", func() error {
			_, err := x.Transition(ctx, []txindex.Transition{{Key: r.Key, From: contracts.ToBeLoaded, To: contracts.Failed}})
			return err
		}},
		{"lower-depth", func() error { _, err := x.LowerDepth(ctx, []txindex.Lowering{{Key: r.Key}}); return err }},
		{"counts", func() error { _, err := x.Counts(ctx, "c"); return err }},
		{"peek-counts", func() error { _, err := x.PeekCounts(ctx, "c"); return err }},
		{"count-host", func() error { _, err := x.CountHost(ctx, "c", "a.example"); return err }},
		{"stale", func() error { _, err := x.Stale(ctx, now, 10, []string{"00/1"}); return err }},
		{"claim", func() error { _, _, err := x.Claim(ctx, "00/1", "a", time.Minute); return err }},
		{"renew", func() error {
			_, _, err := x.Renew(ctx, txindex.Lease{Shard: "00/1", Owner: "a", Epoch: 1}, time.Minute)
			return err
		}},
		{"release", func() error { return x.Release(ctx, txindex.Lease{Shard: "00/1", Owner: "a", Epoch: 1}) }},
		{"leases", func() error { _, err := x.Leases(ctx); return err }},
		{"waiting", func() error { _, err := x.Waiting(ctx, "00/1", "", 10); return err }},
		{"due", func() error { _, err := x.Due(ctx, "c", now, 10); return err }},
		{"due-stats", func() error { _, _, err := x.DueStats(ctx, "c", now); return err }},
		{"list", func() error { _, err := x.List(ctx, "c", "", "", 10); return err }},
		{"find", func() error { _, err := x.Find(ctx, "c", txindex.Filter{}, "", 10); return err }},
		{"count-matching", func() error { _, err := x.CountMatching(ctx, "c", txindex.Filter{}); return err }},
		{"hosts-report", func() error { _, err := x.HostsReport(ctx, "c", 10); return err }},
		{"mime-types-report", func() error { _, err := x.MIMETypesReport(ctx, "c", 10); return err }},
		{"status-codes-report", func() error { _, err := x.StatusCodesReport(ctx, "c"); return err }},
		{"failure-reasons-report", func() error { _, err := x.FailureReasonsReport(ctx, "c", 10); return err }},
		// An invalid status fails: counted as an error of transition.
		{"transition", func() error {
			_, err := x.Transition(ctx, []txindex.Transition{{Key: r.Key, From: contracts.Failed, To: "bogus"}})
			if err == nil {
				t.Error("Transition to an invalid status: no error")
			}
			return nil
		}},
	}
	wantTimed := map[string]float64{}
	for _, c := range calls {
		if err := c.call(); err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
		wantTimed[c.op]++
	}
	gotTimed, gotErrors := map[string]float64{}, map[string]float64{}
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["backend"] != "txindex" {
				continue
			}
			switch f.GetName() {
			case "gridcrawl_backend_operation_duration_seconds":
				gotTimed[labels["operation"]] = float64(m.GetHistogram().GetSampleCount())
			case "gridcrawl_backend_operation_errors_total":
				if v := m.GetCounter().GetValue(); v != 0 {
					gotErrors[labels["operation"]] = v
				}
			}
		}
	}
	if diff := cmp.Diff(wantTimed, gotTimed); diff != "" {
		t.Errorf("timed operations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"transition": 1}, gotErrors); diff != "" {
		t.Errorf("operations counted as errors (-want +got):\n%s", diff)
	}
}
