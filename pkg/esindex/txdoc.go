package esindex

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"

	"github.com/gridcrawl/gridcrawl/pkg/txindex"
)

// txDoc is a transaction record as a document: the record and the write
// id of the write that stored this version.
//
// A write id tells a conflict (409) that a write's own first application
// caused from one caused by another writer. A write that the client sends
// again (see retries.go), or that Elasticsearch itself runs again on a new
// primary after the old one failed, finds the document already changed by
// its first application: its condition fails, and the write would be
// reported as lost to a concurrent writer, so that its caller would drop
// work that is in fact its own. The document read after the conflict
// holds the write id when it is that write's version.
type txDoc struct {
	txindex.Record
	Write string `json:"write,omitempty"`
}

// writeIDs makes write ids: a random prefix of the process and a counter,
// unique across processes and calls.
var writeIDs struct {
	prefix string
	n      atomic.Uint64
}

func init() {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand.Read)
	writeIDs.prefix = hex.EncodeToString(b[:]) + "-"
}

// newWriteID returns a new write id.
func newWriteID() string {
	return writeIDs.prefix + strconv.FormatUint(writeIDs.n.Add(1), 36)
}
