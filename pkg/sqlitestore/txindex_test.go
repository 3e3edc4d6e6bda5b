package sqlitestore

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

func testRecord(crawl string, i int, s contracts.Status) txindex.Record {
	u := fmt.Sprintf("http://h%d.example/%d", i%7, i)
	now := time.Now()
	return txindex.Record{Key: txindex.Key(crawl, u), CrawlID: crawl, URL: u, Host: fmt.Sprintf("h%d.example", i%7),
		Status: s, StatusTime: now, CreatedAt: now}
}

// TestListStrategiesAgree checks that both ways List can read (see List)
// return the same pages.
func TestListStrategiesAgree(t *testing.T) {
	x := open(t, filepath.Join(t.TempDir(), "tx.db"), OpenTxIndex)
	var recs []txindex.Record
	for i := range 300 {
		crawl := []string{"a", "b", "c"}[i%3]
		recs = append(recs, testRecord(crawl, i, contracts.Statuses[i%5]))
	}
	if _, err := x.Create(t.Context(), recs); err != nil {
		t.Fatalf("Create: %v", err)
	}
	for _, crawl := range []string{"a", "b", "missing"} {
		for _, status := range append([]contracts.Status{""}, contracts.Statuses...) {
			for _, limit := range []int{1, 7, 500} {
				var pages [2][]string
				for i, byKey := range []bool{false, true} {
					after := ""
					for range 200 {
						rs, err := x.list(t.Context(), crawl, status, after, limit, byKey)
						if err != nil {
							t.Fatalf("list(%q, %q, byKey %v): %v", crawl, status, byKey, err)
						}
						for _, r := range rs {
							pages[i] = append(pages[i], r.Key)
						}
						if len(rs) < limit {
							break
						}
						after = rs[len(rs)-1].Key
					}
				}
				if diff := cmp.Diff(pages[0], pages[1]); diff != "" {
					t.Errorf("list(%q, %q, limit %d): by status (-) and by key (+) differ:\n%s", crawl, status, limit, diff)
				}
				if !slices.IsSorted(pages[0]) {
					t.Errorf("list(%q, %q, limit %d) not in key order", crawl, status, limit)
				}
			}
		}
	}
}

// TestCountsMatchRecords checks the counts table against the records after
// a random mix of creates (with duplicates) and transitions (many not
// applying).
func TestCountsMatchRecords(t *testing.T) {
	x := open(t, filepath.Join(t.TempDir(), "tx.db"), OpenTxIndex)
	r := rand.New(rand.NewPCG(1, 2))
	crawls := []string{"a", "b"}
	for range 40 {
		var recs []txindex.Record
		for range 20 {
			recs = append(recs, testRecord(crawls[r.IntN(2)], r.IntN(200), contracts.Statuses[r.IntN(3)]))
		}
		if _, err := x.Create(t.Context(), recs); err != nil {
			t.Fatalf("Create: %v", err)
		}
		var ts []txindex.Transition
		for range 20 {
			ts = append(ts, txindex.Transition{
				Key:  testRecord(crawls[r.IntN(2)], r.IntN(200), "").Key,
				From: contracts.Statuses[r.IntN(len(contracts.Statuses))],
				To:   contracts.Statuses[r.IntN(len(contracts.Statuses))],
			})
		}
		if _, err := x.Transition(t.Context(), ts); err != nil {
			t.Fatalf("Transition: %v", err)
		}
	}
	for _, crawl := range crawls {
		got, err := x.Counts(t.Context(), crawl)
		if err != nil {
			t.Fatalf("Counts: %v", err)
		}
		want := map[contracts.Status]int64{}
		rows, err := x.st.r.QueryContext(t.Context(), `SELECT status, count(*) FROM records WHERE crawl_id = ? GROUP BY status`, crawl)
		if err != nil {
			t.Fatalf("count records: %v", err)
		}
		for rows.Next() {
			var s string
			var n int64
			if err := rows.Scan(&s, &n); err != nil {
				t.Fatal(err)
			}
			want[contracts.Status(s)] = n
		}
		rows.Close()
		if len(want) < 3 {
			t.Fatalf("records of %q in only %d statuses; the test mixes too little", crawl, len(want))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Counts(%q) (-records +counts):\n%s", crawl, diff)
		}
	}
}

func TestCreateRejectsInvalid(t *testing.T) {
	x := open(t, filepath.Join(t.TempDir(), "tx.db"), OpenTxIndex)
	good := testRecord("c", 1, contracts.ToBeLoaded)
	for _, tc := range []struct {
		name string
		mod  func(r *txindex.Record)
	}{
		{"empty key", func(r *txindex.Record) { r.Key = "" }},
		{"empty crawl", func(r *txindex.Record) { r.CrawlID = "" }},
		{"unknown status", func(r *txindex.Record) { r.Status = "lost" }},
	} {
		bad := good
		tc.mod(&bad)
		if _, err := x.Create(t.Context(), []txindex.Record{good, bad}); err == nil {
			t.Errorf("%s: Create = nil error, want an error", tc.name)
		}
	}
	if _, err := x.Get(t.Context(), good.Key); !errors.Is(err, txindex.ErrNotFound) {
		t.Errorf("Get after rejected batches: error %v, want ErrNotFound (nothing written)", err)
	}
	if _, err := x.Transition(t.Context(), []txindex.Transition{{Key: good.Key, From: contracts.ToBeLoaded, To: "lost"}}); err == nil {
		t.Errorf("Transition to an unknown status = nil error, want an error")
	}
}

func TestCancelledContext(t *testing.T) {
	x := open(t, filepath.Join(t.TempDir(), "tx.db"), OpenTxIndex)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := testRecord("c", 1, contracts.ToBeLoaded)
	if _, err := x.Create(ctx, []txindex.Record{r}); !errors.Is(err, context.Canceled) {
		t.Errorf("Create with a cancelled context: error %v, want context.Canceled", err)
	}
	if _, err := x.Get(t.Context(), r.Key); !errors.Is(err, txindex.ErrNotFound) {
		t.Errorf("Get after a cancelled Create: error %v, want ErrNotFound", err)
	}
}

func TestClosed(t *testing.T) {
	x, err := OpenTxIndex(filepath.Join(t.TempDir(), "tx.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := x.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := x.Create(t.Context(), []txindex.Record{testRecord("c", 1, contracts.ToBeLoaded)}); !errors.Is(err, ErrClosed) {
		t.Errorf("Create after Close: error %v, want ErrClosed", err)
	}
}

// TestWriterIsolatesFailures runs a group with a failing job: the others
// must still commit, and only the failing caller sees the error.
func TestWriterIsolatesFailures(t *testing.T) {
	st, err := openStore(filepath.Join(t.TempDir(), "w.db"), 1, []string{`CREATE TABLE t (v INTEGER UNIQUE)`})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.close() })
	w := newWriter(st.w)
	t.Cleanup(w.close)
	insert := func(v int) func(*sql.Tx) error {
		return func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO t (v) VALUES (?)`, v)
			return err
		}
	}
	var jobs []*job
	for _, fn := range []func(*sql.Tx) error{insert(1), insert(2), insert(2), insert(3)} {
		jobs = append(jobs, &job{ctx: t.Context(), run: fn, result: make(chan error, 1)})
	}
	w.commit(jobs)
	var errs []bool
	for _, j := range jobs {
		errs = append(errs, <-j.result != nil)
	}
	if diff := cmp.Diff([]bool{false, false, true, false}, errs); diff != "" {
		t.Errorf("job failed (-want +got):\n%s", diff)
	}
	var vs []int
	rows, err := st.r.Query(`SELECT v FROM t ORDER BY v`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	if diff := cmp.Diff([]int{1, 2, 3}, vs); diff != "" {
		t.Errorf("stored values (-want +got):\n%s", diff)
	}
}

func TestSchemaVersionMismatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tx.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`CREATE TABLE records (key TEXT PRIMARY KEY)`, `PRAGMA user_version = 0`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	x, err := OpenTxIndex(path)
	if err == nil {
		x.Close()
		t.Fatalf("OpenTxIndex of an old schema = nil error, want an error")
	}
	if !strings.Contains(err.Error(), "schema version") {
		t.Errorf("OpenTxIndex of an old schema: error %v, want it to name the schema version", err)
	}
}

// TestSurvivesKill kills (SIGKILL) a child process while its goroutines
// write: every write the child was told is done must be there afterwards,
// and the counts must agree with the records.
func TestSurvivesKill(t *testing.T) {
	const env = "SQLITESTORE_KILL_CHILD"
	if path := os.Getenv(env); path != "" {
		killChild(path)
		return
	}
	if testing.Short() {
		t.Skip("spawns a process")
	}
	path := filepath.Join(t.TempDir(), "tx.db")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSurvivesKill$")
	cmd.Env = append(os.Environ(), env+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Each line is "created KEY" or "moved KEY", printed after the call
	// returned; kill while the writes go on.
	created, moved := map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(out)
	for len(moved) < 300 && sc.Scan() {
		verb, key, _ := strings.Cut(sc.Text(), " ")
		switch verb {
		case "created":
			created[key] = true
		case "moved":
			moved[key] = true
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if len(moved) < 300 {
		t.Fatalf("child reported only %d transitions", len(moved))
	}
	x := open(t, path, OpenTxIndex)
	for key := range created {
		r, err := x.Get(t.Context(), key)
		if err != nil {
			t.Fatalf("Get(%q) of a reported create after kill: %v", key, err)
		}
		if moved[key] && r.Status != contracts.ToBeParsed {
			t.Errorf("Get(%q) after kill = %q, want the reported transition to %q", key, r.Status, contracts.ToBeParsed)
		}
	}
	counts, err := x.Counts(t.Context(), "killed")
	if err != nil {
		t.Fatalf("Counts: %v", err)
	}
	var n int64
	if err := x.st.r.QueryRowContext(t.Context(), `SELECT count(*) FROM records WHERE crawl_id = 'killed' AND status = ?`,
		string(contracts.ToBeParsed)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if counts[contracts.ToBeParsed] != n || n < int64(len(moved)) {
		t.Errorf("after kill Counts = %v, records to-be-parsed = %d, reported moved = %d", counts, n, len(moved))
	}
}

// killChild writes from several goroutines, reporting each finished write,
// until it is killed.
func killChild(path string) {
	x, err := OpenTxIndex(path)
	if err != nil {
		fmt.Println("open:", err)
		return
	}
	ctx := context.Background()
	var mu sync.Mutex
	report := func(verb, key string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Println(verb, key)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				batch := make([]txindex.Record, 20)
				for j := range batch {
					batch[j] = testRecord("killed", g*1_000_000+i*20+j, contracts.ToBeLoaded)
				}
				created, err := x.Create(ctx, batch)
				if err != nil {
					fmt.Println("create:", err)
					return
				}
				for j, c := range created {
					if c {
						report("created", batch[j].Key)
					}
				}
				k := batch[i%20].Key
				applied, err := x.Transition(ctx, []txindex.Transition{{Key: k, From: contracts.ToBeLoaded, To: contracts.ToBeParsed}})
				if err != nil {
					fmt.Println("transition:", err)
					return
				}
				if applied[0] {
					report("moved", k)
				}
			}
		})
	}
	wg.Wait()
}

// TestNewFileSettings checks that a new file gets the journal mode and the
// checkpoint interval openStore asks for.
func TestNewFileSettings(t *testing.T) {
	x, err := OpenTxIndex(filepath.Join(t.TempDir(), "tx.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	for _, c := range []struct {
		db     *sql.DB
		pragma string
		want   int
	}{
		{x.st.w, "wal_autocheckpoint", 10000},
	} {
		var got int
		if err := c.db.QueryRow("PRAGMA " + c.pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("PRAGMA %s = %d, want %d", c.pragma, got, c.want)
		}
	}
	var mode string
	if err := x.st.w.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("PRAGMA journal_mode = %q (%v), want wal", mode, err)
	}
}
