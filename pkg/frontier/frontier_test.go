package frontier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// filings numbers the calls of entries, whose URLs are new each time.
var filings atomic.Int64

func entries(group, crawl string, n int, due time.Time) []Entry {
	es := make([]Entry, n)
	f := filings.Add(1)
	for i := range es {
		es[i] = Entry{Group: group, Crawl: crawl, URL: fmt.Sprintf("http://%s/p/%d/%d", group, f, i), Depth: i % 5, Hops: i % 3,
			Due: due, Data: []byte(fmt.Sprintf("d%d", i))}
	}
	return es
}

func urls(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.URL
	}
	return out
}

func mustTake(t *testing.T, s *Store, id QueueID, n int, until time.Time) []Entry {
	t.Helper()
	es, err := s.Take(t.Context(), id, n, until)
	if err != nil {
		t.Fatalf("Take(%v, %d): %v", id, n, err)
	}
	return es
}

func TestTakeInDueOrderOncePerURL(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "f.db"))
	base := time.UnixMilli(1_700_000_000_000)
	// Filed out of due order: later ones first.
	late := entries("a.test", "c1", 3, base.Add(2*time.Second))
	for i := range late {
		late[i].URL += "-late"
	}
	if _, err := s.File(t.Context(), late); err != nil {
		t.Fatal(err)
	}
	early := entries("a.test", "c1", 3, base)
	if _, err := s.File(t.Context(), early); err != nil {
		t.Fatal(err)
	}
	id := QueueID{"a.test", "c1"}
	got := mustTake(t, s, id, 4, base.Add(time.Second))
	if want := urls(early); strings.Join(urls(got), " ") != strings.Join(want, " ") {
		t.Fatalf("Take before the late ones are due = %v, want %v", urls(got), want)
	}
	if got[1].Depth != 1 || got[1].Hops != 1 || string(got[1].Data) != "d1" || !got[1].Due.Equal(base) {
		t.Errorf("entry came back as %+v", got[1])
	}
	got = mustTake(t, s, id, 10, base.Add(3*time.Second))
	if want := urls(late); strings.Join(urls(got), " ") != strings.Join(want, " ") {
		t.Fatalf("second Take = %v, want only the late ones %v (none taken twice)", urls(got), want)
	}
	if got := mustTake(t, s, id, 10, base.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("third Take = %v, want nothing: everything is taken", urls(got))
	}
	qs := s.Queues()
	if len(qs) != 1 || qs[0].Filed != 6 || qs[0].Taken != 6 {
		t.Fatalf("Queues = %+v, want one queue with 6 filed, 6 taken", qs)
	}
}

func TestQueuesOfGroupsAndCrawlsApart(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "f.db"))
	now := time.Now()
	for _, q := range []struct {
		g, c string
		n    int
	}{{"a.test", "c1", 2}, {"a.test", "c2", 3}, {"b.test", "c1", 4}} {
		if _, err := s.File(t.Context(), entries(q.g, q.c, q.n, now)); err != nil {
			t.Fatal(err)
		}
	}
	got := mustTake(t, s, QueueID{"a.test", "c2"}, 10, now)
	if len(got) != 3 {
		t.Fatalf("Take(a.test, c2) = %d URLs, want 3", len(got))
	}
	for _, e := range got {
		if e.Group != "a.test" || e.Crawl != "c2" {
			t.Errorf("Take(a.test, c2) gave %+v", e)
		}
	}
	want := "a.test/c1 2 0, a.test/c2 3 3, b.test/c1 4 0"
	var have []string
	for _, q := range s.Queues() {
		have = append(have, fmt.Sprintf("%s/%s %d %d", q.Group, q.Crawl, q.Filed, q.Taken))
	}
	if strings.Join(have, ", ") != want {
		t.Errorf("Queues = %s, want %s", strings.Join(have, ", "), want)
	}
}

func TestDoneRefileRelease(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "f.db"))
	now := time.Now()
	id := QueueID{"a.test", "c1"}
	if _, err := s.File(t.Context(), entries(id.Group, id.Crawl, 4, now)); err != nil {
		t.Fatal(err)
	}
	got := mustTake(t, s, id, 4, now)
	if err := s.Done(t.Context(), got[:1]); err != nil {
		t.Fatalf("Done: %v", err)
	}
	later := now.Add(time.Minute)
	got[1].Data = []byte("attempt 2")
	if err := s.Refile(t.Context(), got[1], later); err != nil {
		t.Fatalf("Refile: %v", err)
	}
	if err := s.Release(got[2:3]); err != nil {
		t.Fatalf("Release: %v", err)
	}
	again := mustTake(t, s, id, 10, now)
	if len(again) != 1 || again[0].URL != got[2].URL {
		t.Fatalf("Take after Release = %v, want only the released %s (the refiled one is not due)", urls(again), got[2].URL)
	}
	due := mustTake(t, s, id, 10, later)
	if len(due) != 1 || due[0].URL != got[1].URL || string(due[0].Data) != "attempt 2" || !due[0].Due.Equal(time.UnixMilli(later.UnixMilli())) {
		t.Fatalf("Take when the refiled URL is due = %+v, want %s with its new data and due time", due, got[1].URL)
	}
	if q := s.Queues(); len(q) != 1 || q[0].Filed != 3 {
		t.Fatalf("Queues = %+v, want 3 filed (4 less one done)", q)
	}
	if err := s.Done(t.Context(), []Entry{{Group: id.Group, Crawl: id.Crawl, URL: "http://never/taken"}}); err == nil {
		t.Error("Done of an entry never taken succeeded")
	}
}

func TestFiledBehindTheCursorIsTaken(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "f.db"))
	now := time.Now()
	id := QueueID{"a.test", "c1"}
	if _, err := s.File(t.Context(), entries(id.Group, id.Crawl, 2, now.Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	mustTake(t, s, id, 2, now.Add(time.Second))
	// Due before what was taken: the cursor has passed its key.
	early := entries(id.Group, id.Crawl, 1, now.Add(-time.Hour))
	early[0].URL = "http://a.test/early"
	if _, err := s.File(t.Context(), early); err != nil {
		t.Fatal(err)
	}
	got := mustTake(t, s, id, 5, now)
	if len(got) != 1 || got[0].URL != "http://a.test/early" {
		t.Fatalf("Take = %v, want the URL filed behind the cursor", urls(got))
	}
}

func TestReopenKeepsWhatIsNotDone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	id := QueueID{"a.test", "c1"}
	filed := entries(id.Group, id.Crawl, 10, now)
	if _, err := s.File(t.Context(), filed); err != nil {
		t.Fatal(err)
	}
	got := mustTake(t, s, id, 6, now)
	if err := s.Done(t.Context(), got[:2]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	if q := s.Queues(); len(q) != 1 || q[0].Filed != 8 || q[0].Taken != 0 {
		t.Fatalf("Queues after reopen = %+v, want 8 filed, none taken", q)
	}
	again := mustTake(t, s, id, 100, now)
	if want := urls(filed)[2:]; strings.Join(urls(again), " ") != strings.Join(want, " ") {
		t.Fatalf("Take after reopen = %v, want %v (taken and not done ones included)", urls(again), want)
	}
	for _, e := range again {
		if e.Recovered {
			t.Fatalf("%s is Recovered after a clean Close", e.URL)
		}
	}
	// New entries after reopen sort after the old ones.
	more := entries(id.Group, id.Crawl, 1, now)
	more[0].URL = "http://a.test/new"
	if _, err := s.File(t.Context(), more); err != nil {
		t.Fatal(err)
	}
	if got := mustTake(t, s, id, 5, now); len(got) != 1 || got[0].URL != "http://a.test/new" {
		t.Fatalf("Take of the URL filed after reopen = %v", urls(got))
	}
}

func TestFileNamesTheMissingField(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "f.db"))
	_, err := s.File(t.Context(), []Entry{{Group: "a.test", URL: "http://a.test/"}})
	if err == nil || !strings.Contains(err.Error(), "crawl") {
		t.Fatalf("File without a crawl = %v, want an error naming it", err)
	}
	if q := s.Queues(); len(q) != 0 {
		t.Fatalf("Queues after a refused File = %+v, want none: the batch is one transaction", q)
	}
}

// TestFiledURLsSurviveKill files, takes and removes URLs in a child process
// that then kills itself with SIGKILL: every URL filed and not removed is
// in the store when it opens again (removals are not synced: those of the
// last moment may come back, to be skipped by the caller).
func TestFiledURLsSurviveKill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledChild$")
	cmd.Env = append(os.Environ(), "FRONTIER_KILL_CHILD="+path)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !asExit(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL; output:\n%s", err, out)
	}
	s := open(t, path)
	q := s.Queues()
	if len(q) != 1 || q[0].Filed < 950 || q[0].Filed > 1000 {
		t.Fatalf("Queues after the kill = %+v, want 950 to 1,000 filed", q)
	}
	got := mustTake(t, s, q[0].QueueID, 2000, time.Now().Add(time.Hour))
	if len(got) != q[0].Filed {
		t.Fatalf("Take after the kill = %d URLs, want the %d filed", len(got), q[0].Filed)
	}
	have := map[string]bool{}
	for _, e := range got {
		have[e.URL] = true
		if !e.Recovered {
			t.Fatalf("%s, filed before the kill, is not Recovered", e.URL)
		}
	}
	for i := 50; i < 1000; i++ {
		if u := fmt.Sprintf("http://a.test/p/%d", i); !have[u] {
			t.Fatalf("%s, filed and not removed, is gone after the kill", u)
		}
	}
	// A URL filed after the kill is not Recovered; those filed before stay
	// Recovered after a clean Close and Open, until removed.
	if err := s.Release(got); err != nil {
		t.Fatal(err)
	}
	more := []Entry{{Group: "a.test", Crawl: "c1", URL: "http://a.test/new", Due: time.Now()}}
	if _, err := s.File(t.Context(), more); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	recovered := 0
	for _, e := range mustTake(t, s, q[0].QueueID, 2000, time.Now().Add(time.Hour)) {
		if e.Recovered != (e.URL != "http://a.test/new") {
			t.Fatalf("%s: Recovered %v after a clean reopen", e.URL, e.Recovered)
		}
		if e.Recovered {
			recovered++
		}
	}
	if recovered != len(got) {
		t.Fatalf("%d Recovered after a clean reopen, want %d", recovered, len(got))
	}
}

func asExit(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*target = e
	}
	return ok
}

// TestKilledChild is the child of TestFiledURLsSurviveKill.
func TestKilledChild(t *testing.T) {
	path := os.Getenv("FRONTIER_KILL_CHILD")
	if path == "" {
		t.Skip("the child of TestFiledURLsSurviveKill")
	}
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 10 {
		es := entries("a.test", "c1", 100, now)
		for j := range es {
			es[j].URL = fmt.Sprintf("http://a.test/p/%d", i*100+j)
		}
		if _, err := s.File(context.Background(), es); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Take(context.Background(), QueueID{"a.test", "c1"}, 100, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Done(context.Background(), got[:50]); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(time.Minute)
}

func TestOldestIsTheEarliestFiledURL(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "f.db"))
	id := QueueID{"a.test", "c1"}
	if _, ok, err := s.Oldest(t.Context(), id); ok || err != nil {
		t.Fatalf("Oldest of an empty queue = %v, %v, want false, nil", ok, err)
	}
	base := time.UnixMilli(1_700_000_000_000)
	if _, err := s.File(t.Context(), entries("a.test", "c1", 2, base.Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.File(t.Context(), entries("a.test", "c1", 1, base)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.File(t.Context(), entries("a.test", "c2", 1, base.Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	oldest := func(want time.Time) {
		t.Helper()
		got, ok, err := s.Oldest(t.Context(), id)
		if err != nil || !ok || !got.Equal(want) {
			t.Fatalf("Oldest = %v, %v, %v, want %v (another crawl's URL of the group is not this queue's)", got, ok, err, want)
		}
	}
	oldest(base)
	// A taken URL is still filed: the oldest until it is done.
	es := mustTake(t, s, id, 1, base.Add(time.Hour))
	oldest(base)
	if err := s.Done(t.Context(), es); err != nil {
		t.Fatal(err)
	}
	oldest(base.Add(time.Second))
	es = mustTake(t, s, id, 2, base.Add(time.Hour))
	if err := s.Done(t.Context(), es); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Oldest(t.Context(), id); ok || err != nil {
		t.Fatalf("Oldest of an emptied queue = %v, %v, want false, nil", ok, err)
	}
}

// TestURLFiledOncePerQueue: a URL filed again while it waits in its queue
// (a rebuild and a contract, or a contract delivered twice) is not filed
// twice, in one batch or in two, and can be filed again once removed;
// another crawl's queue files it apart.
func TestURLFiledOncePerQueue(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "f.db"))
	now := time.Now()
	id := QueueID{"a.test", "c1"}
	es := entries(id.Group, id.Crawl, 3, now)
	if n, err := s.File(t.Context(), append(slices.Clone(es), es[0])); err != nil || n != 3 {
		t.Fatalf("File of 3 URLs and a copy = %d, %v; want 3", n, err)
	}
	if n, err := s.File(t.Context(), es); err != nil || n != 0 {
		t.Fatalf("File of the 3 again = %d, %v; want 0", n, err)
	}
	other := slices.Clone(es[:1])
	other[0].Crawl = "c2"
	if n, err := s.File(t.Context(), other); err != nil || n != 1 {
		t.Fatalf("File of the URL in another crawl's queue = %d, %v; want 1", n, err)
	}
	got := mustTake(t, s, id, 10, now)
	if len(got) != 3 {
		t.Fatalf("Take = %v, want the 3 URLs once each", urls(got))
	}
	if err := s.Done(t.Context(), got[:1]); err != nil {
		t.Fatal(err)
	}
	if n, err := s.File(t.Context(), es[:1]); err != nil || n != 1 {
		t.Fatalf("File of a removed URL = %d, %v; want 1", n, err)
	}
}

// TestClearDropsEverythingAndTheOwner: Clear removes every URL and the
// owner tag; entries taken before it are no longer the store's.
func TestClearDropsEverythingAndTheOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if tag, err := s.Owner(); err != nil || tag != nil {
		t.Fatalf("Owner of a new store = %q, %v; want none", tag, err)
	}
	if err := s.SetOwner([]byte("a\x001")); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	id := QueueID{"a.test", "c1"}
	es := entries(id.Group, id.Crawl, 4, now)
	if _, err := s.File(t.Context(), es); err != nil {
		t.Fatal(err)
	}
	got := mustTake(t, s, id, 2, now)
	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	if q := s.Queues(); len(q) != 0 {
		t.Fatalf("Queues after Clear = %+v, want none", q)
	}
	if err := s.Done(t.Context(), got); !errors.Is(err, errNotTaken) {
		t.Fatalf("Done of an entry taken before Clear = %v, want errNotTaken", err)
	}
	if n, err := s.File(t.Context(), es); err != nil || n != 4 {
		t.Fatalf("File after Clear = %d, %v; want 4", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	if tag, err := s.Owner(); err != nil || tag != nil {
		t.Fatalf("Owner after Clear and reopen = %q, %v; want none", tag, err)
	}
	if q := s.Queues(); len(q) != 1 || q[0].Filed != 4 {
		t.Fatalf("Queues after reopen = %+v, want the 4 filed after Clear", q)
	}
}
