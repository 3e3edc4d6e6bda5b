package esindex

import (
	"sort"
	"strings"
	"sync"

	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// Kinds of read a Client counts (Reads). Gets count documents (an mget of
// 100 ids is 100), the others count requests.
const (
	// ReadRealtimeGet is a document read realtime (get, mget): a document
	// written since the shard's last refresh makes the shard refresh its
	// internal reader, a new segment for one document.
	ReadRealtimeGet = "realtime-get"
	// ReadRefreshedGet is a document read from the last refresh
	// (realtime=false).
	ReadRefreshedGet = "refreshed-get"
	// ReadSearch is a search request (queries, aggregations, ids searches).
	ReadSearch = "search"
	// ReadCount is a _count request.
	ReadCount = "count"
	// ReadRefresh is a refresh the client asked for before a read.
	ReadRefresh = "refresh"
	// ReadUpdate is an update operation, which reads its document
	// (realtime) before it writes it.
	ReadUpdate = "update"
)

// Read is how many reads of one kind a Client sent to one index.
type Read struct {
	Index string // the index's name after the prefix: transactions, web, ...
	Kind  string // ReadRealtimeGet, ...
	N     int64
}

// readCounter counts a Client's reads by index and kind.
type readCounter struct {
	prefix string
	mu     sync.Mutex
	n      map[[2]string]int64
}

func (r *readCounter) add(index, kind string, n int) {
	if n <= 0 {
		return
	}
	index = strings.TrimPrefix(index, r.prefix+"-")
	r.mu.Lock()
	if r.n == nil {
		r.n = map[[2]string]int64{}
	}
	r.n[[2]string{index, kind}] += int64(n)
	r.mu.Unlock()
}

// request counts req when it is a read that is not a get (gets are counted
// by document where they are sent).
func (r *readCounter) request(req esapi.Request) {
	switch q := req.(type) {
	case esapi.SearchRequest:
		r.add(strings.Join(q.Index, ","), ReadSearch, 1)
	case esapi.CountRequest:
		r.add(strings.Join(q.Index, ","), ReadCount, 1)
	case esapi.IndicesRefreshRequest:
		r.add(strings.Join(q.Index, ","), ReadRefresh, 1)
	case esapi.GetRequest:
		kind := ReadRealtimeGet
		if q.Realtime != nil && !*q.Realtime {
			kind = ReadRefreshedGet
		}
		r.add(q.Index, kind, 1)
	}
}

// Reads returns the reads the client sent so far, by index and kind, in
// index and kind order.
func (c *Client) Reads() []Read {
	c.reads.mu.Lock()
	defer c.reads.mu.Unlock()
	out := make([]Read, 0, len(c.reads.n))
	for k, n := range c.reads.n {
		out = append(out, Read{Index: k[0], Kind: k[1], N: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Index != out[j].Index {
			return out[i].Index < out[j].Index
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}
