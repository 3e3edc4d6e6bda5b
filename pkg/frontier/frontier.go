// Package frontier keeps the URLs that wait for their crawl host groups in
// a durable store instead of in broker messages or in memory: one Pebble
// database (a log-structured key-value store) per loader shard, each URL
// filed under its group and crawl and ordered there by the time it is due,
// its earliest fetch time (the way Veidemann keeps a crawl host group's
// URIs ordered by earliest fetch time, and Heritrix keeps every host queue
// on disk with only the queue's state in memory).
//
// A loader files the URLs of a contract (File) and may then acknowledge
// the contract: the URLs are durable. It takes a few of a group's URLs at a
// time (Take), the earliest due first, and removes each once its outcome is
// recorded (Done), or files it again for later (Refile) or gives it back
// (Release). What was taken and not removed is taken again after a restart:
// the store holds every URL until its outcome is durable elsewhere, so a
// process killed at any point loses none, and the caller skips the ones
// whose outcome was recorded before the kill.
//
// In memory the store keeps per queue (group and crawl) the number of
// filed URLs and a cursor, the last URL taken; nothing else grows with the
// number of waiting URLs. Pebble reads through a block cache of bounded
// size. A URL filed and removed before its memtable is flushed never
// reaches a table file.
package frontier

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Entry is one filed URL.
type Entry struct {
	Group string
	Crawl string
	URL   string
	Depth int
	Hops  int
	// Due is the earliest time the URL may be fetched; the store orders a
	// queue's URLs by it (milliseconds), then by filing order.
	Due time.Time
	// Data is kept with the URL and given back as it was filed; the store
	// does not read it.
	Data []byte
	// Recovered is set by Take on an entry filed before the store was last
	// stopped without Close (a crash, kill -9): its removal (Done) may have
	// been lost with the unsynced end of the log although its outcome is
	// recorded, so its Data may be stale: read what it describes afresh.
	Recovered bool

	k   key   // set by File and Take
	gen int64 // the store's generation at Take (see Clear)
}

// key orders a queue's entries: due time (Unix milliseconds), then the
// store's filing sequence, unique in the store.
type key struct {
	due, seq int64
}

func (a key) less(b key) bool { return a.due < b.due || (a.due == b.due && a.seq < b.seq) }

// QueueID names one queue: a crawl's URLs of one crawl host group.
type QueueID struct {
	Group, Crawl string
}

// Queue is what the store knows of one queue.
type Queue struct {
	QueueID
	// Filed is the number of URLs filed and not removed, taken ones
	// included.
	Filed int
	// Taken is the number of URLs taken and not yet removed, refiled or
	// released.
	Taken int
}

// queue is the in-memory state of one queue.
type queue struct {
	prefix []byte
	filed  int
	taken  int
	// cursor is the greatest key taken since the store opened; Take reads
	// the database after it. behind holds entries filed or given back
	// with a key at or before the cursor, which Take hands out first.
	cursor key
	behind []Entry
}

// start is the cursor of a queue nothing was taken from.
var start = key{due: -1 << 62}

// cacheBytes bounds Pebble's block cache.
const cacheBytes = 8 << 20

// Store is the frontier of one loader shard. It is safe for concurrent use.
type Store struct {
	db    *pebble.DB
	cache *pebble.Cache

	closeOnce sync.Once
	closeErr  error

	mu  sync.Mutex
	seq int64
	// recovered is the greatest sequence filed before an unclean stop (0:
	// the store was closed cleanly); see Entry.Recovered.
	recovered int64
	// gen counts the Clears: an entry taken before one is no longer the
	// store's to remove, refile or give back.
	gen     int64
	queues  map[QueueID]*queue
	byGroup map[string]map[string]*queue // group → crawl → queue
}

// Keys: 'u', the group, 0, the crawl, 0, then the due time and the
// sequence as big-endian numbers (the due time with its sign bit flipped,
// so that keys sort as times do). Values: the depth, the hops and the
// URL's length as varints, the URL, then the entry's data.
const urlsPrefix = 'u'

// Each filed URL also has a key 'k', the group, 0, the crawl, 0, the URL
// (no value), so that a URL is filed once per queue however many times it
// comes: from a contract and from a rebuild of the frontier, or from a
// contract the broker delivered twice.
const seenPrefix = 'k'

func seenKey(b []byte, id QueueID, url string) []byte {
	b = append(b, seenPrefix)
	b = append(b, id.Group...)
	b = append(b, 0)
	b = append(b, id.Crawl...)
	b = append(b, 0)
	return append(b, url...)
}

func queuePrefix(id QueueID) []byte {
	b := make([]byte, 0, 3+len(id.Group)+len(id.Crawl))
	b = append(b, urlsPrefix)
	b = append(b, id.Group...)
	b = append(b, 0)
	b = append(b, id.Crawl...)
	return append(b, 0)
}

func appendKey(b []byte, k key) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(k.due)^1<<63)
	return binary.BigEndian.AppendUint64(b, uint64(k.seq))
}

func parseKey(b []byte) (QueueID, key, error) {
	if len(b) < 1+2+16 || b[0] != urlsPrefix {
		return QueueID{}, key{}, fmt.Errorf("frontier key %q: malformed", b)
	}
	rest, tail := b[1:len(b)-16], b[len(b)-16:]
	g, c, ok := bytes.Cut(rest, []byte{0})
	if !ok || len(c) == 0 || c[len(c)-1] != 0 {
		return QueueID{}, key{}, fmt.Errorf("frontier key %q: malformed", b)
	}
	return QueueID{string(g), string(c[:len(c)-1])}, key{
		due: int64(binary.BigEndian.Uint64(tail) ^ 1<<63),
		seq: int64(binary.BigEndian.Uint64(tail[8:])),
	}, nil
}

func appendValue(b []byte, e *Entry) []byte {
	b = binary.AppendVarint(b, int64(e.Depth))
	b = binary.AppendVarint(b, int64(e.Hops))
	b = binary.AppendUvarint(b, uint64(len(e.URL)))
	b = append(b, e.URL...)
	return append(b, e.Data...)
}

func parseValue(v []byte, e *Entry) error {
	depth, n := binary.Varint(v)
	if n <= 0 {
		return errors.New("frontier value: malformed depth")
	}
	v = v[n:]
	hops, n := binary.Varint(v)
	if n <= 0 {
		return errors.New("frontier value: malformed hops")
	}
	v = v[n:]
	l, n := binary.Uvarint(v)
	if n <= 0 || uint64(len(v)-n) < l {
		return errors.New("frontier value: malformed url")
	}
	e.Depth, e.Hops, e.URL = int(depth), int(hops), string(v[n:n+int(l)])
	if rest := v[n+int(l):]; len(rest) > 0 {
		e.Data = slices.Clone(rest)
	}
	return nil
}

// Open opens (creating it when absent) the frontier database in directory
// dir and counts the URLs of every queue.
func Open(ctx context.Context, dir string) (*Store, error) {
	cache := pebble.NewCache(cacheBytes)
	db, err := pebble.Open(dir, &pebble.Options{Cache: cache, Logger: quietLogger{}, FS: privateFS{vfs.Default}})
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("open frontier %s: %w", dir, err)
	}
	s := &Store{db: db, cache: cache, queues: map[QueueID]*queue{}, byGroup: map[string]map[string]*queue{}}
	err = s.load(ctx)
	if err == nil {
		err = s.recover()
	}
	if err != nil {
		_ = db.Close() // not s.Close, which would mark the store closed cleanly
		cache.Unref()
		return nil, fmt.Errorf("open frontier %s: %w", dir, err)
	}
	return s, nil
}

// recover finds whether the store was last stopped without Close (Close
// leaves cleanKey) and sets s.recovered: after such a stop, the greatest
// sequence filed, kept under recoveredKey (synced) for later runs, so that
// an entry filed before a crash stays Recovered until it is removed.
func (s *Store) recover() error {
	_, closer, err := s.db.Get(cleanKey)
	clean := err == nil
	switch {
	case clean:
		_ = closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return err
	}
	v, closer, err := s.db.Get(recoveredKey)
	switch {
	case err == nil:
		if len(v) == 8 {
			s.recovered = int64(binary.BigEndian.Uint64(v))
		}
		_ = closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	if !clean && s.seq > s.recovered {
		s.recovered = s.seq
		if err := b.Set(recoveredKey, binary.BigEndian.AppendUint64(nil, uint64(s.recovered)), nil); err != nil {
			return err
		}
	}
	if err := b.Delete(cleanKey, nil); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

// cleanKey is written by Close and removed by Open; recoveredKey holds the
// watermark of Entry.Recovered. Both are outside the URLs' key range.
var (
	cleanKey     = []byte{'c'}
	recoveredKey = []byte{'r'}
)

// load counts the filed URLs of every queue and finds the greatest
// sequence number.
func (s *Store) load(ctx context.Context) error {
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: []byte{urlsPrefix}, UpperBound: []byte{urlsPrefix + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	var last *queue
	var lastID QueueID
	for ok := it.First(); ok; ok = it.Next() {
		id, k, err := parseKey(it.Key())
		if err != nil {
			return err
		}
		if last == nil || id != lastID {
			last, lastID = s.queue(id), id
		}
		last.filed++
		s.seq = max(s.seq, k.seq)
	}
	return it.Error()
}

// ownerKey holds the owner tag of the store (SetOwner), outside the URLs'
// key range.
var ownerKey = []byte{'o'}

// Owner returns the tag SetOwner stored last; nil when none was.
func (s *Store) Owner() ([]byte, error) {
	v, closer, err := s.db.Get(ownerKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read frontier owner: %w", err)
	}
	defer closer.Close()
	return slices.Clone(v), nil
}

// SetOwner stores tag, synced: whose frontier the store is, and since when
// (a loader shard's owner and lease epoch).
func (s *Store) SetOwner(tag []byte) error {
	if err := s.db.Set(ownerKey, tag, pebble.Sync); err != nil {
		return fmt.Errorf("store frontier owner: %w", err)
	}
	return nil
}

// Clear removes every filed URL, taken ones included, and the owner tag:
// the store of a shard that another owner had since this one filed them.
func (s *Store) Clear() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{urlsPrefix}, []byte{urlsPrefix + 1}, nil); err != nil {
		return fmt.Errorf("clear frontier: %w", err)
	}
	if err := b.DeleteRange([]byte{seenPrefix}, []byte{seenPrefix + 1}, nil); err != nil {
		return fmt.Errorf("clear frontier: %w", err)
	}
	if err := b.Delete(ownerKey, nil); err != nil {
		return fmt.Errorf("clear frontier: %w", err)
	}
	if err := b.Delete(recoveredKey, nil); err != nil {
		return fmt.Errorf("clear frontier: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("clear frontier: %w", err)
	}
	s.queues, s.byGroup = map[QueueID]*queue{}, map[string]map[string]*queue{}
	s.gen++
	s.recovered = 0
	return nil
}

// Close closes the database, noting that it was closed: entries filed
// now are not Recovered when taken after the next Open.
// Later calls return the first one's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		err := s.db.Set(cleanKey, nil, pebble.Sync)
		s.closeErr = errors.Join(err, s.db.Close())
		s.cache.Unref()
	})
	return s.closeErr
}

// Bytes returns the size of the database's files on disk.
func (s *Store) Bytes() int64 { return int64(s.db.Metrics().DiskSpaceUsage()) }

// File files es in one batch, written to the database's log and synced:
// when it returns nil, every entry is durable. An entry without a due time
// is due now. A URL filed in its queue already (and not removed) is not
// filed again; File returns how many entries it filed.
func (s *Store) File(ctx context.Context, es []Entry) (int, error) {
	if len(es) == 0 {
		return 0, nil
	}
	for _, e := range es {
		switch {
		case e.Group == "" || strings.IndexByte(e.Group, 0) >= 0:
			return 0, fmt.Errorf("file url %q: the group %q is empty or holds a NUL", e.URL, e.Group)
		case e.Crawl == "" || strings.IndexByte(e.Crawl, 0) >= 0:
			return 0, fmt.Errorf("file url %q: the crawl %q is empty or holds a NUL", e.URL, e.Crawl)
		case e.URL == "":
			return 0, fmt.Errorf("file url: the url of crawl %q, group %q is empty", e.Crawl, e.Group)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UnixMilli()
	b := s.db.NewBatch()
	defer b.Close()
	filed := make([]Entry, 0, len(es))
	seq := s.seq
	var kbuf, vbuf, sbuf []byte
	var batch map[string]bool // the seen keys of es, when es has several
	for _, e := range es {
		id := QueueID{e.Group, e.Crawl}
		sbuf = seenKey(sbuf[:0], id, e.URL)
		if batch[string(sbuf)] {
			continue
		}
		switch _, closer, err := s.db.Get(sbuf); {
		case err == nil:
			_ = closer.Close()
			continue
		case !errors.Is(err, pebble.ErrNotFound):
			return 0, fmt.Errorf("file urls: %w", err)
		}
		if len(es) > 1 {
			if batch == nil {
				batch = make(map[string]bool, len(es))
			}
			batch[string(sbuf)] = true
		}
		if err := b.Set(sbuf, nil, nil); err != nil {
			return 0, fmt.Errorf("file urls: %w", err)
		}
		seq++
		e.k = key{due: now, seq: seq}
		if !e.Due.IsZero() {
			e.k.due = e.Due.UnixMilli()
		}
		e.Due = time.UnixMilli(e.k.due)
		kbuf = appendKey(append(kbuf[:0], queuePrefix(id)...), e.k)
		vbuf = appendValue(vbuf[:0], &e)
		if err := b.Set(kbuf, vbuf, nil); err != nil {
			return 0, fmt.Errorf("file urls: %w", err)
		}
		filed = append(filed, e)
	}
	if len(filed) == 0 {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, fmt.Errorf("file urls: %w", err)
	}
	s.seq = seq
	for _, e := range filed {
		q := s.queue(QueueID{e.Group, e.Crawl})
		q.filed++
		if !q.cursor.less(e.k) {
			q.behind = append(q.behind, e)
		}
	}
	return len(filed), nil
}

// queue returns the state of queue id, creating it.
func (s *Store) queue(id QueueID) *queue {
	q := s.queues[id]
	if q == nil {
		q = &queue{prefix: queuePrefix(id), cursor: start}
		s.queues[id] = q
		g := s.byGroup[id.Group]
		if g == nil {
			g = map[string]*queue{}
			s.byGroup[id.Group] = g
		}
		g[id.Crawl] = q
	}
	return q
}

// forget drops queue id's state.
func (s *Store) forget(id QueueID) {
	delete(s.queues, id)
	if g := s.byGroup[id.Group]; g != nil {
		delete(g, id.Crawl)
		if len(g) == 0 {
			delete(s.byGroup, id.Group)
		}
	}
}

// Take returns up to n of queue id's URLs due at until or before, not taken
// yet, the earliest due first. They stay filed until Done, Refile or
// Release.
func (s *Store) Take(ctx context.Context, id QueueID, n int, until time.Time) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[id]
	if q == nil || n <= 0 {
		return nil, nil
	}
	limit := until.UnixMilli()
	var out []Entry
	if len(q.behind) > 0 {
		slices.SortFunc(q.behind, func(a, b Entry) int {
			return cmp.Or(cmp.Compare(a.k.due, b.k.due), cmp.Compare(a.k.seq, b.k.seq))
		})
		i := 0
		for i < len(q.behind) && len(out) < n && q.behind[i].k.due <= limit {
			out = append(out, q.behind[i])
			i++
		}
		q.behind = slices.Delete(q.behind, 0, i)
	}
	if len(out) < n && q.filed > q.taken+len(out) {
		// After the cursor (its key plus one), up to the end of until's
		// millisecond.
		lower := appendKey(slices.Clip(q.prefix), key{due: q.cursor.due, seq: q.cursor.seq + 1})
		upper := appendKey(slices.Clip(q.prefix), key{due: limit + 1})
		it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			q.behind = append(q.behind, out...)
			return nil, fmt.Errorf("take urls: %w", err)
		}
		for ok := it.First(); ok && len(out) < n; ok = it.Next() {
			_, k, err := parseKey(it.Key())
			if err != nil {
				_ = it.Close()
				q.behind = append(q.behind, out...)
				return nil, fmt.Errorf("take urls: %w", err)
			}
			e := Entry{Group: id.Group, Crawl: id.Crawl, k: k, Due: time.UnixMilli(k.due), Recovered: k.seq <= s.recovered}
			v, err := it.ValueAndErr()
			if err == nil {
				err = parseValue(v, &e)
			}
			if err != nil {
				_ = it.Close()
				q.behind = append(q.behind, out...)
				return nil, fmt.Errorf("take urls: %w", err)
			}
			out = append(out, e)
			q.cursor = k
		}
		if err := it.Close(); err != nil {
			return nil, fmt.Errorf("take urls: %w", err)
		}
	}
	q.taken += len(out)
	for i := range out {
		out[i].gen = s.gen
	}
	return out, nil
}

// errNotTaken is the error of Done, Refile and Release for an entry that
// was not taken from this store.
var errNotTaken = errors.New("entry not taken from the frontier")

// Done removes taken entries es in one batch: their outcome is durable
// elsewhere. The batch is not synced: an entry whose removal a crash takes
// back is taken again, and its outcome found recorded.
func (s *Store) Done(ctx context.Context, es []Entry) error {
	if len(es) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	qs, err := s.taken(es)
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	var kbuf []byte
	for i, e := range es {
		kbuf = appendKey(append(kbuf[:0], qs[i].prefix...), e.k)
		if err := b.Delete(kbuf, nil); err != nil {
			return fmt.Errorf("remove urls: %w", err)
		}
		if err := b.Delete(seenKey(kbuf[:0], QueueID{e.Group, e.Crawl}, e.URL), nil); err != nil {
			return fmt.Errorf("remove urls: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("remove urls: %w", err)
	}
	for _, q := range qs {
		q.filed--
		q.taken--
	}
	s.drop(es)
	return nil
}

// Refile files taken entry e again, due at due, with its Data as e has it
// now: a URL to try again later stays in the store, not in a delayed
// message. Like Done, it is not synced: a crash takes it back to its
// former key and data.
func (s *Store) Refile(ctx context.Context, e Entry, due time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	qs, err := s.taken([]Entry{e})
	if err != nil {
		return err
	}
	q := qs[0]
	next := key{due: due.UnixMilli(), seq: s.seq + 1}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Delete(appendKey(slices.Clip(q.prefix), e.k), nil); err != nil {
		return fmt.Errorf("refile url: %w", err)
	}
	moved := e
	moved.k, moved.Due = next, time.UnixMilli(next.due)
	if err := b.Set(appendKey(slices.Clip(q.prefix), next), appendValue(nil, &moved), nil); err != nil {
		return fmt.Errorf("refile url: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("refile url: %w", err)
	}
	s.seq = next.seq
	q.taken--
	if !q.cursor.less(moved.k) {
		q.behind = append(q.behind, moved)
	}
	return nil
}

// Release gives taken entries back unchanged: Take hands them out again
// (a lease that ended without an outcome).
func (s *Store) Release(es []Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	qs, err := s.taken(es)
	if err != nil {
		return err
	}
	for i, e := range es {
		qs[i].taken--
		qs[i].behind = append(qs[i].behind, e)
	}
	return nil
}

// taken returns the queues of taken entries es.
func (s *Store) taken(es []Entry) ([]*queue, error) {
	qs := make([]*queue, len(es))
	for i, e := range es {
		q := s.queues[QueueID{e.Group, e.Crawl}]
		if q == nil || e.k.seq == 0 || q.taken <= 0 || e.gen != s.gen {
			return nil, fmt.Errorf("%s: %w", e.URL, errNotTaken)
		}
		qs[i] = q
	}
	return qs, nil
}

// drop forgets the queues of es that hold no URL.
func (s *Store) drop(es []Entry) {
	for _, e := range es {
		id := QueueID{e.Group, e.Crawl}
		if q := s.queues[id]; q != nil && q.filed == 0 && q.taken == 0 && len(q.behind) == 0 {
			s.forget(id)
		}
	}
}

// Queues returns every queue with filed URLs, by group and crawl.
func (s *Store) Queues() []Queue {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Queue, 0, len(s.queues))
	for id, q := range s.queues {
		if q.filed > 0 {
			out = append(out, Queue{QueueID: id, Filed: q.filed, Taken: q.taken})
		}
	}
	slices.SortFunc(out, func(a, b Queue) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Crawl, b.Crawl))
	})
	return out
}

// QueuesOf returns the queues of group with filed URLs, by crawl.
func (s *Store) QueuesOf(group string) []Queue {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Queue, 0, len(s.byGroup[group]))
	for crawl, q := range s.byGroup[group] {
		if q.filed > 0 {
			out = append(out, Queue{QueueID: QueueID{group, crawl}, Filed: q.filed, Taken: q.taken})
		}
	}
	slices.SortFunc(out, func(a, b Queue) int { return cmp.Compare(a.Crawl, b.Crawl) })
	return out
}

// Oldest returns the due time of queue id's earliest filed URL, taken ones
// included, and false when the queue holds none: how late the group is
// with the crawl's URLs.
func (s *Store) Oldest(ctx context.Context, id QueueID) (time.Time, bool, error) {
	s.mu.Lock()
	q := s.queues[id]
	var prefix []byte
	if q != nil && q.filed > 0 {
		prefix = q.prefix
	}
	s.mu.Unlock()
	if prefix == nil {
		return time.Time{}, false, nil
	}
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: prefix, UpperBound: appendKey(slices.Clip(prefix), key{due: 1<<63 - 1, seq: 1<<63 - 1})})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("oldest url: %w", err)
	}
	defer it.Close()
	if !it.First() {
		return time.Time{}, false, it.Error()
	}
	_, k, err := parseKey(it.Key())
	if err != nil {
		return time.Time{}, false, fmt.Errorf("oldest url: %w", err)
	}
	return time.UnixMilli(k.due), true, nil
}

// quietLogger drops Pebble's informational lines and keeps its errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	pebble.DefaultLogger.Errorf(format, args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}

// privateFS is the operating system's file system with the files Pebble
// creates readable by their owner only, as every file of a data directory
// is (they hold the crawl's URLs).
type privateFS struct{ vfs.FS }

func private(f vfs.File, name string, err error) (vfs.File, error) {
	if err == nil {
		if cerr := os.Chmod(name, 0o600); cerr != nil {
			_ = f.Close()
			return nil, cerr
		}
	}
	return f, err
}

func (p privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.Create(name, category)
	return private(f, name, err)
}

func (p privateFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := p.FS.OpenReadWrite(name, category, opts...)
	return private(f, name, err)
}

func (p privateFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.ReuseForWrite(oldname, newname, category)
	return private(f, newname, err)
}

func (p privateFS) Lock(name string) (io.Closer, error) {
	c, err := p.FS.Lock(name)
	if err == nil {
		if cerr := os.Chmod(name, 0o600); cerr != nil {
			_ = c.Close()
			return nil, cerr
		}
	}
	return c, err
}

func (p privateFS) MkdirAll(dir string, perm os.FileMode) error {
	return p.FS.MkdirAll(dir, perm&0o700)
}
