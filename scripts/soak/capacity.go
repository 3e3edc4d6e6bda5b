package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/gridcrawl/gridcrawl/pkg/assets"
)

// capacityFamilies are the metric families that -capacity adds up over
// every service, series by series (name and labels): what the services
// published to the broker and asked of their backends.
var capacityFamilies = []string{
	"gridcrawl_queue_published_total",
	"gridcrawl_queue_consumed_total",
	"gridcrawl_backend_operation_duration_seconds_count",
	"gridcrawl_loader_urls_total",
	"gridcrawl_loader_parked_urls_total",
	"gridcrawl_loader_warc_bytes_total",
	"gridcrawl_crawler_pages_total",
	"gridcrawl_crawler_links_enqueued_total",
}

// capacitySeries reads every series of capacityFamilies from a service's
// metrics listener, keyed by its name and labels as /metrics writes them.
func capacitySeries(addr string) (map[string]float64, error) {
	cl := http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, n := range capacityFamilies {
			if !strings.HasPrefix(line, n+" ") && !strings.HasPrefix(line, n+"{") {
				continue
			}
			i := strings.LastIndexByte(line, ' ')
			if f, err := strconv.ParseFloat(line[i+1:], 64); err == nil && i > 0 {
				out[line[:i]] += f
			}
		}
	}
	return out, sc.Err()
}

// indexStats are the figures of one index from _stats (primaries) and _count.
type indexStats struct {
	count        int64 // _count: documents as the API counts them
	luceneDocs   int64 // docs.count: Lucene documents (nested ones count apart)
	deleted      int64 // docs.deleted: replaced versions not merged away yet
	store        int64 // store.size_in_bytes of the primaries
	indexOps     int64 // indexing.index_total: documents written (created or replaced)
	queries      int64 // search.query_total: queries (searches, counts), per shard
	fetches      int64 // search.fetch_total
	gets         int64 // get.total: realtime gets (an mget counts each document)
	segments     int64 // segments.count
	shards, reps int
}

// esIndexStats returns the stats of the indices prefix-*, by index name.
func esIndexStats(esURL, prefix string) (map[string]*indexStats, error) {
	var body struct {
		Indices map[string]struct {
			Primaries struct {
				Docs  struct{ Count, Deleted int64 }
				Store struct {
					SizeInBytes int64 `json:"size_in_bytes"`
				}
				Indexing struct {
					IndexTotal int64 `json:"index_total"`
				}
				Search struct {
					QueryTotal int64 `json:"query_total"`
					FetchTotal int64 `json:"fetch_total"`
				}
				Get      struct{ Total int64 }
				Segments struct{ Count int64 }
			}
		}
	}
	if err := esJSON(http.MethodGet, esURL+"/"+prefix+"-*/_stats/docs,store,indexing,search,get,segments", &body); err != nil {
		return nil, err
	}
	var settings map[string]struct {
		Settings struct {
			Index struct {
				Shards   string `json:"number_of_shards"`
				Replicas string `json:"number_of_replicas"`
			}
		}
	}
	if err := esJSON(http.MethodGet, esURL+"/"+prefix+"-*/_settings", &settings); err != nil {
		return nil, err
	}
	out := map[string]*indexStats{}
	for name, ix := range body.Indices {
		p := ix.Primaries
		st := &indexStats{luceneDocs: p.Docs.Count, deleted: p.Docs.Deleted, store: p.Store.SizeInBytes,
			indexOps: p.Indexing.IndexTotal, queries: p.Search.QueryTotal, fetches: p.Search.FetchTotal, gets: p.Get.Total, segments: p.Segments.Count}
		st.shards, _ = strconv.Atoi(settings[name].Settings.Index.Shards)
		st.reps, _ = strconv.Atoi(settings[name].Settings.Index.Replicas)
		var c struct{ Count int64 }
		if err := esJSON(http.MethodGet, esURL+"/"+name+"/_count", &c); err != nil {
			return nil, err
		}
		st.count = c.Count
		out[name] = st
	}
	return out, nil
}

// esJSON sends a bodiless request to Elasticsearch and decodes the answer
// into out (nil: discarded).
func esJSON(method, url string, out any) error {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return err
	}
	resp, err := esClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %.300s", method, url, resp.Status, b)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	return nil
}

// txStatuses returns the number of records of the transaction index by status.
func txStatuses(esURL, txIndex string) (map[string]int64, error) {
	body := `{"size":0,"aggs":{"s":{"terms":{"field":"status","size":50}}}}`
	resp, err := esClient.Post(esURL+"/"+txIndex+"/_search", "application/json", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Aggregations struct {
			S struct {
				Buckets []struct {
					Key      string
					DocCount int64 `json:"doc_count"`
				}
			}
		}
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("status aggregation of %s: %s: %.300s", txIndex, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, b := range r.Aggregations.S.Buckets {
		out[b.Key] = b.DocCount
	}
	return out, nil
}

// objectKinds returns the number and bytes of the bucket's objects by
// kind: WARC segments, their CDXJ indices, and others by their first key
// component.
func objectKinds(ctx context.Context, bucket string) (map[string][2]int64, error) {
	cl, err := minioClient()
	if err != nil {
		return nil, err
	}
	out := map[string][2]int64{}
	for o := range cl.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			return out, o.Err
		}
		kind := "other: " + strings.SplitN(o.Key, "/", 2)[0]
		switch {
		case strings.HasSuffix(o.Key, assets.CDXJSuffix):
			kind = "CDXJ"
		case strings.HasSuffix(o.Key, ".warc.gz"), strings.HasSuffix(o.Key, ".warc"):
			kind = "WARC"
		}
		v := out[kind]
		v[0]++
		v[1] += o.Size
		out[kind] = v
	}
	return out, nil
}

// capacityReport prints the per-page sizes and counts of the run (one
// crawl, no kills): Elasticsearch bytes and operations per page, before
// and after a force merge, MinIO bytes per page, broker messages per page,
// backend operations per page by the services' own counts, and the
// transaction records per page fetched, and the broker bytes of the
// frontier. pages is the web server's count of pages fetched (distinct URLs,
// robots.txt not counted); series are the services' counters of
// capacityFamilies added up; frontier is the largest sample of the frontier
// taken during the crawl.
func capacityReport(w io.Writer, esURL, prefix, bucket string, pages int, series map[string]float64, frontier frontierSample) error {
	if pages <= 0 {
		return fmt.Errorf("capacity: no pages fetched")
	}
	p := float64(pages)
	fmt.Fprintf(w, "\ncapacity: per page fetched (%d pages, the web server's count of distinct URLs, robots.txt not counted)\n", pages)
	// A refresh and a flush: the flush commits the segments, so that files
	// of segments merged away since the last commit leave the disk (until a
	// commit, it keeps them for recovery: right after a crawl they can take
	// several times the live segments). Elasticsearch itself flushes when the
	// translog reaches 512 MB or a shard goes idle.
	if err := esJSON(http.MethodPost, esURL+"/"+prefix+"-*/_refresh", nil); err != nil {
		return err
	}
	if err := esJSON(http.MethodPost, esURL+"/"+prefix+"-*/_flush", nil); err != nil {
		return err
	}
	// Elasticsearch caches store sizes for index.store.stats_refresh_interval
	// (10 s by default): each read waits it out.
	settle := func() { time.Sleep(11 * time.Second) }
	settle()
	before, err := esIndexStats(esURL, prefix)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "elasticsearch: forcemerge to one segment (POST %s-*/_forcemerge?max_num_segments=1) ...\n", prefix)
	if err := esJSON(http.MethodPost, esURL+"/"+prefix+"-*/_forcemerge?max_num_segments=1", nil); err != nil {
		return err
	}
	_ = esJSON(http.MethodPost, esURL+"/"+prefix+"-*/_refresh", nil)
	settle()
	after, err := esIndexStats(esURL, prefix)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(before))
	for n := range before {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "%-14s %6s %8s %8s %8s %5s %12s %9s %8s %5s %12s %9s %8s %9s %8s\n", "index", "shards", "docs", "lucene", "deleted", "segs",
		"store B", "B/doc", "deleted", "segs", "merged B", "B/doc", "writes/p", "queries/p", "gets/p")
	for _, n := range names {
		b, a := before[n], after[n]
		if a == nil {
			a = b
		}
		perDoc := func(bytes int64) string {
			if b.count == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f", float64(bytes)/float64(b.count))
		}
		fmt.Fprintf(w, "%-14s %6s %8d %8d %8d %5d %12d %9s %8d %5d %12d %9s %8.2f %9.2f %8.2f\n", strings.TrimPrefix(n, prefix+"-"), fmt.Sprintf("%d+%d", b.shards, b.reps),
			b.count, b.luceneDocs, b.deleted, b.segments, b.store, perDoc(b.store), a.deleted, a.segments, a.store, perDoc(a.store),
			float64(b.indexOps)/p, float64(b.queries)/p, float64(b.gets)/p)
	}
	fmt.Fprintf(w, "(of the primaries, shards: primaries+replicas; docs: _count; lucene: docs.count, nested documents apart; deleted: replaced versions not merged away; segs: segments; store B: after a refresh and a flush, before the force merge; then deleted, segs and merged B after it; writes: indexing.index_total; queries: search.query_total, searches and counts; gets: get.total, realtime gets, an mget counting each document; operations counted from the index's creation)\n")

	tx := before[prefix+"-transactions"]
	if tx != nil {
		st, err := txStatuses(esURL, prefix+"-transactions")
		if err != nil {
			return err
		}
		var keys []string
		for k := range st {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, st[k]))
		}
		fmt.Fprintf(w, "transaction records: %d, %.3f per page fetched (by status: %s)\n", tx.count, float64(tx.count)/p, strings.Join(parts, ", "))
	}

	if frontier.urls > 0 {
		bytes := "message_bytes not given by the broker (quorum queues on RabbitMQ 3.10)"
		if frontier.bytes > 0 {
			bytes = fmt.Sprintf("%d B, %.0f B per waiting URL", frontier.bytes, float64(frontier.bytes)/float64(frontier.urls))
		}
		fmt.Fprintf(w, "frontier at its largest sample: %d URLs to-be-loaded in %d loader contracts (loader_pending shards and their delay queues, ready and unacked), %.1f URLs a contract; %s\n",
			frontier.urls, frontier.messages, float64(frontier.urls)/float64(max(frontier.messages, 1)), bytes)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kinds, err := objectKinds(ctx, bucket)
	if err != nil {
		return err
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		v := kinds[k]
		fmt.Fprintf(w, "minio %-14s %6d objects %12d B  %9.0f B/page\n", k+":", v[0], v[1], float64(v[1])/p)
	}

	fmt.Fprintf(w, "services' counters, added up over every service, per page fetched:\n")
	var ss []string
	for k := range series {
		ss = append(ss, k)
	}
	slices.Sort(ss)
	for _, k := range ss {
		if series[k] == 0 {
			continue
		}
		fmt.Fprintf(w, "  %-100s %12.0f %9.3f\n", k, series[k], series[k]/p)
	}
	return nil
}

// frontierSample is the frontier at one moment: the URLs waiting to be
// fetched (transaction records to-be-loaded) and the loader contracts
// holding them in the broker (every loader_pending shard with its delay
// queues, where parked URLs wait; ready and unacked messages alike).
type frontierSample struct {
	urls, messages, bytes int64
}

// sampleFrontier reads the frontier of the run: the records to-be-loaded
// in txIndex and the messages and body bytes of the loader queues of vhost.
func sampleFrontier(ctl []string, vhost, esURL, txIndex string) (frontierSample, error) {
	var s frontierSample
	body := `{"query":{"term":{"status":"to-be-loaded"}}}`
	resp, err := esClient.Post(esURL+"/"+txIndex+"/_count", "application/json", strings.NewReader(body))
	if err != nil {
		return s, err
	}
	var c struct{ Count int64 }
	err = json.NewDecoder(resp.Body).Decode(&c)
	resp.Body.Close()
	if err != nil {
		return s, fmt.Errorf("count to-be-loaded: %w", err)
	}
	s.urls = c.Count
	out, err := rabbitmqctl(ctl, "list_queues", "-p", vhost, "--no-table-headers", "name", "messages", "message_bytes")
	if err != nil {
		return s, err
	}
	s.messages, s.bytes = loaderQueueBytes(out)
	return s, nil
}

// loaderQueueBytes adds up the messages and bytes of the loader queues
// (loader_pending, its shards and their delay queues, not the dead-letter
// queues) in the output of rabbitmqctl list_queues name messages
// message_bytes.
func loaderQueueBytes(out string) (messages, bytes int64) {
	for _, l := range strings.Split(out, "\n") {
		// RabbitMQ 3.10 leaves message_bytes empty for quorum queues.
		f := strings.Fields(l)
		if len(f) < 2 || len(f) > 3 || !strings.HasPrefix(f[0], "loader_pending") || strings.HasSuffix(f[0], ".dead") {
			continue
		}
		m, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		messages += m
		if len(f) == 3 {
			if b, err := strconv.ParseInt(f[2], 10, 64); err == nil {
				bytes += b
			}
		}
	}
	return messages, bytes
}
