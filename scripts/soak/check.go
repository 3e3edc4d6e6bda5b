package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/txindex"
	"github.com/gridcrawl/gridcrawl/pkg/websim"
)

// expectedWeb is the oracle: the URLs reachable from starts within depth
// links, walked breadth first over the web's own link graph (it imports
// nothing of the crawler).
func expectedWeb(w *websim.Web, starts []string, depth int) []string {
	index := map[string][2]int{}
	cfg := w.Config()
	for h := range cfg.Hosts {
		for p := range cfg.PagesPerHost {
			index[w.URL(h, p)] = [2]int{h, p}
		}
	}
	seen := map[string]bool{}
	frontier := starts
	for _, s := range starts {
		seen[s] = true
	}
	for d := 0; d < depth && len(frontier) > 0; d++ {
		var next []string
		for _, u := range frontier {
			hp := index[u]
			for _, l := range w.Links(hp[0], hp[1]) {
				if !seen[l] {
					seen[l] = true
					next = append(next, l)
				}
			}
		}
		frontier = next
	}
	out := make([]string, 0, len(seen))
	for u := range seen {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// storedDoc is what the check reads of a stored document.
type storedDoc struct {
	id      string
	version int64 // Elasticsearch's _version: how many times the document was stored
}

// scanDocs returns the documents of crawlID in the index docsIndex by URL
// (several when one URL has several documents), with their _version.
func scanDocs(esURL, docsIndex, crawlID string) (map[string][]storedDoc, error) {
	type hit struct {
		ID      string `json:"_id"`
		Version int64  `json:"_version"`
		Source  struct {
			URL string `json:"url_s"`
		} `json:"_source"`
	}
	type page struct {
		ScrollID string `json:"_scroll_id"`
		Hits     struct {
			Hits []hit `json:"hits"`
		} `json:"hits"`
	}
	post := func(path string, body any, out any) error {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		resp, err := esClient.Post(esURL+path, "application/json", bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("elasticsearch %s: %w", path, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("elasticsearch %s: %s", path, resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(out)
	}
	var p page
	if err := post("/"+docsIndex+"/_search?scroll=2m", map[string]any{
		"size": 5000, "version": true, "_source": []string{"url_s"}, "sort": []string{"_doc"},
		"query": map[string]any{"term": map[string]any{"crawl_id_s": crawlID}},
	}, &p); err != nil {
		return nil, err
	}
	out := map[string][]storedDoc{}
	for len(p.Hits.Hits) > 0 {
		for _, h := range p.Hits.Hits {
			out[h.Source.URL] = append(out[h.Source.URL], storedDoc{id: h.ID, version: h.Version})
		}
		id := p.ScrollID
		p = page{}
		if err := post("/_search/scroll", map[string]any{"scroll": "2m", "scroll_id": id}, &p); err != nil {
			return nil, err
		}
	}
	if p.ScrollID != "" {
		b, _ := json.Marshal(map[string]any{"scroll_id": p.ScrollID})
		req, _ := http.NewRequest(http.MethodDelete, esURL+"/_search/scroll", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := esClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	return out, nil
}

// epochResult is the check of one crawl against its web.
type epochResult struct {
	epoch              int
	crawlID            string
	finished           bool
	start              time.Time // when the crawl was submitted
	wall               time.Duration
	expected           int // reachable pages (oracle)
	status             contracts.CrawlStatus
	documents          int   // stored documents of the crawl
	lost               int   // reachable, no document
	extra              int   // documents of URLs the oracle does not reach
	multiDoc           int   // URLs with more than one document
	rewritten          int   // documents stored more than once (_version > 1)
	refetchedAfterKill int   // fetches beyond the first of a page fetched just before a loader kill
	replayed           int64 // of the extra stores, those of work in flight at a kill, done again (at-least-once)
	relowered          int64 // of the extra stores, those after a depth lowering sent the page back to to-be-parsed
	writes             int64 // document index operations in all (sum of _version)
	stores             int64 // index operations beyond one per document (sum of _version - 1)
	requests           websim.RequestStats
	polite             politeness // each host's shortest gap in the web server's log
	pending            int64      // the termination query's count once MCP said finished (-1: not run)
	pendingErr         error
	examples           []string // a few lost or duplicated URLs, for the report
}

// outage is a time a service was down: from its kill to its restart.
type outage struct {
	service  string
	from, to time.Time
}

// check compares the crawl's stored documents and the web's request log with
// the oracle. kills are the kills so far, to tell the work they redid
// apart.
func check(esURL, docsIndex, txIndex string, web *websim.Web, want []string, st contracts.CrawlStatus, delay time.Duration, kills []outage) (epochResult, error) {
	var mcpDown, loaderDown, crawlerDown []outage
	for _, k := range kills {
		switch {
		case k.service == "mcp":
			mcpDown = append(mcpDown, k)
		case strings.HasPrefix(k.service, "loader"):
			loaderDown = append(loaderDown, k)
		case strings.HasPrefix(k.service, "crawler"):
			crawlerDown = append(crawlerDown, k)
		}
	}
	r := epochResult{crawlID: st.CrawlID, status: st, expected: len(want)}
	docs, err := scanDocs(esURL, docsIndex, st.CrawlID)
	if err != nil {
		return r, err
	}
	wanted := make(map[string]bool, len(want))
	for _, u := range want {
		wanted[u] = true
		if len(docs[u]) == 0 {
			r.lost++
			if len(r.examples) < 10 {
				r.examples = append(r.examples, "lost "+u)
			}
		}
	}
	for u, ds := range docs {
		r.documents += len(ds)
		if !wanted[u] {
			r.extra += len(ds)
		}
		if len(ds) > 1 {
			r.multiDoc++
		}
		for _, d := range ds {
			r.writes += d.version
			if d.version > 1 {
				r.rewritten++
				r.stores += d.version - 1
			}
		}
	}
	var ids []string
	extra := map[string]int64{}
	for _, ds := range docs {
		for _, d := range ds {
			if d.version > 1 {
				ids = append(ids, d.id)
				extra[d.id] = d.version - 1
			}
		}
	}
	recs, err := getRecords(esURL, txIndex, ids)
	if err != nil {
		return r, err
	}
	var refIDs []string
	for _, id := range ids {
		if rec, ok := recs[id]; ok && rec.Referrer != "" {
			refIDs = append(refIDs, txindex.Key(st.CrawlID, rec.Referrer))
		}
	}
	refs, err := getRecords(esURL, txIndex, refIDs)
	if err != nil {
		return r, err
	}
	for _, id := range ids {
		n, rec := extra[id], recs[id]
		// Each return to to-be-parsed after a parse is one store more. A
		// record lowered while it was being parsed stays to-be-parsed (no
		// trace in the history) but is parsed and stored twice: its depth
		// is then below its referrer's plus one, or the referrer itself
		// was parsed twice (it went back to to-be-parsed, or its own
		// document was stored twice) and found it again on its new,
		// shorter path. A lowering that leaves none of these traces is not
		// told apart. A referrer's second store is taken for a second
		// parse, which an MCP replay is not (it stores again without
		// parsing): a page re-stored for another reason whose referrer
		// was replayed would be counted as a lowering.
		explained := min(n, rec.returns)
		if explained < n {
			ref, ok := refs[txindex.Key(st.CrawlID, rec.Referrer)]
			refStored := int64(0)
			for _, d := range docs[rec.Referrer] {
				refStored = max(refStored, d.version)
			}
			if ok && (rec.Depth < ref.Depth+1 || ref.returns > 0 || refStored > 1) {
				explained++
			}
		}
		r.relowered += explained
		// MCP stores a batch's documents, then moves their pages to
		// indexed, then acks: killed in between, it stores the batch again
		// when the contract comes back (at-least-once delivery; the same
		// fetch, the same document). Its pages were to-be-indexed before
		// the kill and became indexed only after the restart.
		if explained < n {
			k := min(n-explained, rec.replaysAfter(mcpDown)+rec.reparsesAfter(crawlerDown, 0)+rec.reparsesAfter(loaderDown, 10*time.Second))
			r.replayed += k
			explained += k
		}
		if explained < n && len(r.examples) < 20 {
			var h []string
			for _, x := range rec.History {
				h = append(h, string(x.Status)+" "+x.Time.UTC().Format("15:04:05.000"))
			}
			r.examples = append(r.examples, fmt.Sprintf("document of %s stored %d times, not explained by a lowering (depth %d, history %s)",
				rec.URL, n+1, rec.Depth, strings.Join(h, " > ")))
		}
	}
	log := web.RequestLog()
	r.requests = websim.Stats(log, delay, nil)
	gaps, at := hostGaps(log)
	r.polite = checkPoliteness(gaps, at, delay)
	// A loader killed after a fetch but before recording it leaves the page
	// to-be-loaded, and the contract goes to another loader, which fetches
	// it again (at-least-once). Such a page was first fetched within a
	// minute before a loader's kill and again after it.
	first, again := map[string]websim.Request{}, map[string]bool{}
	for _, q := range log {
		if q.Path == "/robots.txt" {
			continue
		}
		f, seen := first[q.URL]
		if !seen {
			first[q.URL] = q
			continue
		}
		if again[q.URL] {
			continue // counted as fetched twice already, like Stats
		}
		again[q.URL] = true
		inFlight := false
		for _, k := range loaderDown {
			if f.Start.Before(k.from) && f.Start.After(k.from.Add(-time.Minute)) && q.Start.After(k.from) {
				inFlight = true
			}
		}
		if inFlight {
			r.refetchedAfterKill++
		} else if len(r.examples) < 30 {
			r.examples = append(r.examples, fmt.Sprintf("%s fetched again at %s (first at %s), not after a loader kill",
				q.URL, q.Start.Format("15:04:05.000"), f.Start.Format("15:04:05.000")))
		}
	}
	return r, nil
}

// txRecord is what the check reads of a transaction record.
type txRecord struct {
	URL      string `json:"url"`
	Depth    int    `json:"depth"`
	Referrer string `json:"referrer"`
	History  []struct {
		Status contracts.Status `json:"status"`
		Time   time.Time        `json:"time"`
	} `json:"history"`
	returns int64 // times it went back to to-be-parsed after a parse
}

// replaysAfter returns how many of the outages the record went to
// to-be-indexed before and to indexed from a minute before to two minutes
// after: each may have replayed the batch that held its document.
func (rec txRecord) replaysAfter(outages []outage) int64 {
	var queued, indexed time.Time
	for _, h := range rec.History {
		switch h.Status {
		case contracts.ToBeIndexed:
			if queued.IsZero() {
				queued = h.Time // the first: a document on its way since then
			}
		case contracts.Indexed:
			indexed = h.Time
		}
	}
	var n int64
	for _, o := range outages {
		// Indexed after the kill: stored, killed before the transition.
		// Indexed up to a minute before it: the contract is acked only
		// when all its pages are indexed, waiting up to a minute (MCP's
		// deferLimit) for pages still being parsed; killed meanwhile, it
		// is delivered again and stores its indexed pages once more.
		if !queued.IsZero() && queued.Before(o.from) && indexed.After(o.from.Add(-time.Minute)) && indexed.Before(o.to.Add(2*time.Minute)) {
			n++
		}
	}
	return n
}

// reparsesAfter returns how many of the outages the record was
// to-be-parsed at (from before the kill, or up to early after it) and
// to-be-indexed after, within two minutes of the restart. A crawler killed
// after publishing the page's document but before recording it leaves the
// page to-be-parsed, and the contract's redelivery parses and stores it
// again. A loader killed with a contract some of whose pages were fetched
// and recorded leaves them to-be-parsed; the loader that takes the
// contract over publishes their crawler contracts again (the first ones
// may be lost), and when both copies are parsed before either records the
// page, its document is stored twice. early is how long after the kill the
// page may have reached to-be-parsed (the dying loader's last writes land).
func (rec txRecord) reparsesAfter(outages []outage, early time.Duration) int64 {
	var n int64
	for _, o := range outages {
		for i := 1; i < len(rec.History); i++ {
			p, x := rec.History[i-1], rec.History[i]
			if p.Status == contracts.ToBeParsed && x.Status == contracts.ToBeIndexed &&
				p.Time.Before(o.from.Add(early)) && x.Time.After(o.from) && x.Time.Before(o.to.Add(2*time.Minute)) {
				n++
				break
			}
		}
	}
	return n
}

// getRecords reads the transaction records with ids. returns counts how
// many times each went back to to-be-parsed after the crawler had parsed
// it: a page found again on a shorter path while its document was on its
// way to the index is parsed again at its new depth and its document
// stored again (the enqueueing of found URLs), by design.
func getRecords(esURL, txIndex string, ids []string) (map[string]txRecord, error) {
	out := map[string]txRecord{}
	for len(ids) > 0 {
		n := min(len(ids), 1000)
		b, err := json.Marshal(map[string]any{"ids": ids[:n]})
		if err != nil {
			return nil, err
		}
		ids = ids[n:]
		resp, err := esClient.Post(esURL+"/"+txIndex+"/_mget?_source=url,depth,referrer,history", "application/json", bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("read records: %w", err)
		}
		var res struct {
			Docs []struct {
				ID     string   `json:"_id"`
				Found  bool     `json:"found"`
				Source txRecord `json:"_source"`
			} `json:"docs"`
		}
		err = json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read records: %w", err)
		}
		for _, d := range res.Docs {
			if !d.Found {
				continue
			}
			rec := d.Source
			for i := 1; i < len(rec.History); i++ {
				if rec.History[i].Status == contracts.ToBeParsed && rec.History[i-1].Status != contracts.ToBeLoaded {
					rec.returns++
				}
			}
			out[d.ID] = rec
		}
	}
	return out, nil
}

// hostGaps returns, for every host requested more than once, its shortest
// gap between the end of a request (or of all earlier ones, when they
// overlap) and the start of the next, as the web server saw them; a
// negative gap is an overlap. robots.txt requests count like any other:
// the host serves them too. The requests are taken in the order they
// started, as websim.Stats does.
func hostGaps(log []websim.Request) (map[string]time.Duration, map[string]time.Time) {
	byHost := map[string][]websim.Request{}
	for _, r := range log {
		byHost[r.Host] = append(byHost[r.Host], r)
	}
	out := make(map[string]time.Duration, len(byHost))
	at := make(map[string]time.Time, len(byHost))
	for h, rs := range byHost {
		if len(rs) < 2 {
			continue
		}
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Start.Before(rs[j].Start) })
		busyUntil := rs[0].End
		first := true
		for _, r := range rs[1:] {
			if g := r.Start.Sub(busyUntil); first || g < out[h] {
				out[h], at[h], first = g, r.Start, false
			}
			if r.End.After(busyUntil) {
				busyUntil = r.End
			}
		}
	}
	return out, at
}

// politeness is the summary of hostGaps against the delay.
type politeness struct {
	hosts     int           // hosts requested more than once
	min       time.Duration // the shortest gap of any host
	minHost   string
	medianMin time.Duration // the median of the hosts' shortest gaps
	short     []string      // hosts whose shortest gap is below delay - tolerance: "host gap"
}

// gapTolerance is how much shorter than the delay a gap in the web
// server's log may be: none really, since the server stamps a request's
// start after the loader sent it and the end of the previous one before
// the loader read its last byte, so the server sees every gap at least as
// long as the loader waited (both read the same clock, on one machine).
// websim.GapTolerance (1 ms) absorbs timers that fire a little early.
const gapTolerance = websim.GapTolerance

// checkPoliteness summarizes the shortest gap of every host; at is when
// the request after it started.
func checkPoliteness(gaps map[string]time.Duration, at map[string]time.Time, delay time.Duration) politeness {
	p := politeness{hosts: len(gaps)}
	var mins []time.Duration
	hosts := make([]string, 0, len(gaps))
	for h := range gaps {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		g := gaps[h]
		mins = append(mins, g)
		if p.minHost == "" || g < p.min {
			p.min, p.minHost = g, h
		}
		if g < delay-gapTolerance {
			p.short = append(p.short, fmt.Sprintf("%s %s (at %s)", h, g.Round(time.Microsecond), at[h].UTC().Format("15:04:05.000")))
		}
	}
	if len(mins) > 0 {
		sort.Slice(mins, func(i, j int) bool { return mins[i] < mins[j] })
		p.medianMin = mins[len(mins)/2]
	}
	return p
}

// terminationQuery is the body of the documented termination query
// (docs/operations.md, "Is my crawl finished? One Elasticsearch query"):
// the crawl's records not in a final state.
const terminationQuery = `{
  "query": {"bool": {"filter": [
    {"term":  {"crawl_id": "CRAWL_ID"}},
    {"terms": {"status": ["to-be-loaded", "to-be-parsed", "to-be-indexed"]}}]}}}`

// terminationCount refreshes the transaction index and runs the
// termination query for crawlID, as the documentation gives it.
func terminationCount(esURL, txIndex, crawlID string) (int64, error) {
	resp, err := esClient.Post(esURL+"/"+txIndex+"/_refresh", "application/json", nil)
	if err != nil {
		return 0, fmt.Errorf("refresh %s: %w", txIndex, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("refresh %s: %s", txIndex, resp.Status)
	}
	id, _ := json.Marshal(crawlID)
	body := strings.Replace(terminationQuery, `"CRAWL_ID"`, string(id), 1)
	resp, err = esClient.Post(esURL+"/"+txIndex+"/_count", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("termination query: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("termination query: %s", resp.Status)
	}
	var out struct {
		Count *int64 `json:"count"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Count == nil {
		return 0, fmt.Errorf("termination query: no count in the answer (%v)", err)
	}
	return *out.Count, nil
}

// deadLetters lists the dead-letter queues (names ending in .dead) of the
// virtual host with their messages, and the other queues' names, through
// rabbitmqctl. A dead-letter queue is declared when its first contract is
// dead-lettered, so none may exist.
func deadLetters(ctl []string, vhost string) (dead map[string]int, others []string, err error) {
	out, err := rabbitmqctl(ctl, "list_queues", "-p", vhost, "name", "messages", "--no-table-headers")
	if err != nil {
		return nil, nil, err
	}
	dead = map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		if !strings.HasSuffix(f[0], ".dead") {
			others = append(others, f[0])
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, nil, fmt.Errorf("rabbitmqctl list_queues: %q", l)
		}
		dead[f[0]] = n
	}
	return dead, others, nil
}
