package esindex

import (
	"sync"

	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// maxCachedVersions bounds the records a versionCache holds, a few
// hundred bytes each: some MB. A cached version only has to outlive the
// time between a process's read of a record and its transition of it
// (the loader's fetch and segment store, the crawler's parse), during which
// a busy crawler caches some thousands of records.
const maxCachedVersions = 1 << 16

// version is a record as one of its versions in the index: the sequence
// number and primary term Elasticsearch gave that version, and its content.
type version struct {
	seqNo, primaryTerm int64
	rec                txindex.Record
}

// versionCache remembers the last version of a record that this process
// read or wrote, so that modify can send a conditional write without
// reading the record first. A cached version is only ever a guess: the
// write is conditioned on its sequence number and primary term, so it
// applies only if the record is still exactly that version, and a record
// that changed since fails with 409 and is read again. It is safe for
// concurrent use.
type versionCache struct {
	mu sync.Mutex
	m  map[string]version
}

func newVersionCache() *versionCache {
	return &versionCache{m: make(map[string]version)}
}

// get returns the cached version of key.
func (vc *versionCache) get(key string) (version, bool) {
	vc.mu.Lock()
	v, ok := vc.m[key]
	vc.mu.Unlock()
	return v, ok
}

// put remembers v as the version of its record, unless a later version of
// it (a greater sequence number of the same primary term) is cached.
func (vc *versionCache) put(v version) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if old, ok := vc.m[v.rec.Key]; ok && old.primaryTerm == v.primaryTerm && old.seqNo > v.seqNo {
		return
	}
	if len(vc.m) >= maxCachedVersions {
		// Forget an arbitrary record: a miss costs only a read.
		for k := range vc.m {
			delete(vc.m, k)
			break
		}
	}
	vc.m[v.rec.Key] = v
}

// drop forgets key.
func (vc *versionCache) drop(key string) {
	vc.mu.Lock()
	delete(vc.m, key)
	vc.mu.Unlock()
}
