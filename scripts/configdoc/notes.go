package main

// notes describe, for readers of the configuration page, the variables the
// code does not document itself: env-tagged fields without a doc comment,
// and variables read without a tag. A field's doc comment, once written,
// takes the place of its note (the generator then warns that the note is
// unused, so delete it); the test fails on a note that names no variable.
var notes = map[string]string{
	// Backends (wire.Backends).
	"GRIDCRAWL_DATA":               "Data directory of the embedded backends (`grid --data` overrides it). Its files are private (0600, directories 0700).",
	"GRIDCRAWL_ES_PREFIX":          "Prefix of the Elasticsearch index names (`<prefix>-transactions`, `-profiles`, `-web`, `-hcf-fingerprints`).",
	"GRIDCRAWL_S3_ACCESS_KEY":      "S3 access key (required with the endpoint).",
	"GRIDCRAWL_S3_SECRET_KEY":      "S3 secret key (required with the endpoint); never logged.",
	"GRIDCRAWL_S3_BUCKET":          "Bucket, created if missing.",
	"GRIDCRAWL_S3_SECURE":          "Use HTTPS to reach the S3 endpoint.",
	"GRIDCRAWL_S3_REGION":          "Bucket region.",
	"GRIDCRAWL_QUEUE_MAX_ATTEMPTS": "Deliveries of one contract (retries) before it is dead-lettered to `<queue>.dead`. A delivery postponed during a backend outage does not count.",
	// Every service (svc.Common, grid.Config).
	"GRIDCRAWL_LOG_LEVEL": "`debug`, `info`, `warn` or `error` (any case); other values are refused. The service binaries (`mcp`, `loader`, `crawler`, `indexer`) log JSON lines to stderr, each with a `service` key; `grid up` logs text lines of `key=value` pairs (`time=… level=INFO msg=\"crawl created\" crawl_id=…`) to stderr, and `grid crawl` logs them only at `debug`.",
	// MCP.
	"GRIDCRAWL_LISTEN":            "MCP API and dashboard address (`grid up --listen` overrides it). In grid mode behind Docker, listen on `0.0.0.0:PORT`.",
	"GRIDCRAWL_API_TOKEN":         "API token, sent as `Authorization: Bearer TOKEN` or as the basic-auth user name; required in grid mode. Without it the embedded grid serves loopback clients only. Also sent by the `grid` client commands.",
	"GRIDCRAWL_RECOVERY_INTERVAL": "How often the recovery sweep runs.",
	"GRIDCRAWL_RECOVERY_ATTEMPTS": "Republications of one record by the sweep before it fails (`stalled: recovery attempts exhausted`).",
	"GRIDCRAWL_MAX_DUE_PER_CHECK": "Most due URLs of one continuous crawl that one due check takes back into the pipeline (the rest wait for the next check).",
	// Loader.
	"GRIDCRAWL_LOADER_WORKERS":      "Concurrent fetches of a loader (each of a different crawl host group).",
	"GRIDCRAWL_LOADER_PREFETCH":     "Unacked loader contracts a loader holds, shared out over the shards; a crawl host group holds at most half of a shard's (docs/architecture.md, bounded backlog).",
	"GRIDCRAWL_MAX_BODY_BYTES":      "Bytes of a response body kept (more is cut and the WARC record marked truncated); also the cap of a decompressed body. Sitemaps may keep up to 50 MiB.",
	"GRIDCRAWL_FETCH_TIMEOUT":       "Time limit of a whole fetch, body included.",
	"GRIDCRAWL_FETCH_ATTEMPTS":      "Fetches of a URL on timeouts, connection errors, 429 and 503 before it fails.",
	"GRIDCRAWL_FETCH_RETRY_DELAY":   "Base delay of those retries; it grows per attempt and is at least the server's `Retry-After`.",
	"GRIDCRAWL_CRAWL_DELAY_CAP":     "Largest robots.txt `Crawl-delay` honoured; a longer one is clamped to it (it slows the group, it never fails URLs).",
	"GRIDCRAWL_ALLOW_NETS":          "Comma-separated networks the loader may fetch from although they are private, loopback or link-local, which it refuses by default (checked on the dialled address): CIDR prefixes (`192.168.1.0/24`), IP addresses, and the words `loopback` (127.0.0.0/8 and ::1, this machine) and `private` (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 and fc00::/7). Crawling a site on your own machine needs it, e.g. `loopback`; without it such URLs fail with `address not allowed`.",
	"GRIDCRAWL_WARC_FLUSH_INTERVAL": "Fetched records are stored (appended, or one object) at least this often, and at once whenever the loader has no fetch in progress, so that a chain of newly found links advances at the politeness delay.",
	"GRIDCRAWL_WARC_GZIP":           "One gzip member per WARC record (`.warc.gz`); false writes plain `.warc`.",
	"GRIDCRAWL_WARC_SEGMENT_AGE":    "A WARC segment takes no more records once this old (the embedded store appends to a segment until then).",
	"GRIDCRAWL_ROBOTS_TTL":          "Lifetime of a cached robots.txt; a good copy is kept through later errors.",
	// Crawler.
	"GRIDCRAWL_CRAWLER_WORKERS":  "Crawler contracts parsed concurrently.",
	"GRIDCRAWL_CRAWLER_PREFETCH": "Unacked crawler contracts a crawler holds.",
	"GRIDCRAWL_MAX_TEXT_BYTES":   "Visible text kept per document (`text_t`).",
	"GRIDCRAWL_MAX_LINKS":        "Links kept per page; their URLs and anchor texts together take at most 4 bytes per byte of the page (at least 64 KiB), and no URL over 2,048 bytes is kept.",
	"GRIDCRAWL_MAX_REDIRECTS":    "Redirect hops followed from one URL (each hop is a URL of its own, recorded `redirected`). The hop whose redirect would go one further ends `failed` with `too many redirects (N)`, and one that redirects back into its own chain with `redirect loop: back to URL after N hops`.",

	// Read without a tag: the grid command.
	"GRIDCRAWL_API_URL":          "The MCP that `grid status`, `search`, `urls`, `report`, `export` and `crawl` talk to (same as `--api URL`); unset, they use the grid running on the data directory (`DIR/grid.addr`) or open the directory themselves.",
	"GRIDCRAWL_MEM_PROFILE":      "`grid` only: a file to write a heap profile to at the end of the run.",
	"GRIDCRAWL_PROFILE_INTERVAL": "`grid` only, with either profile: write them once per interval (such as `120s`) to `FILE.1`, `FILE.2`…, to compare the start and the end of a long crawl.",
	// Scripts.
	"GRIDCRAWL_DEMO_PORT":           "Printed by the demo site (`go run ./scripts/demosite -print-env`): the port it serves on.",
	"GRIDCRAWL_DEMO_START_URL":      "Printed by the demo site: its first start URL, which `make demo` crawls.",
	"GRIDCRAWL_DEMO_START_URLS":     "Printed by the demo site: all its start URLs, space-separated.",
	"GRIDCRAWL_SERVICES_DIR":        "Where the local backends of `scripts/services/` are installed and keep their state.",
	"GRIDCRAWL_ES_HEAP":             "Heap of the local Elasticsearch (`-Xms`/`-Xmx`), of each node in `scripts/cluster/cluster.sh`.",
	"GRIDCRAWL_CLUSTER_TIMEOUT":     "Seconds `scripts/cluster/cluster.sh` waits for a node to start and join its cluster.",
	"GRIDCRAWL_ES_JAVA_OPTS":        "More JVM options for the local Elasticsearch.",
	"GRIDCRAWL_ES_TIMEOUT":          "Seconds `elasticsearch.sh check` waits for the local node to answer.",
	"GRIDCRAWL_MINIO_TIMEOUT":       "Seconds `minio.sh check` waits for the local MinIO to answer.",
	"GRIDCRAWL_RABBITMQ_TIMEOUT":    "Seconds `rabbitmq.sh check` waits for the local broker's AMQP handshake.",
	"GRIDCRAWL_RABBITMQ_MANAGEMENT": "`1` enables the local RabbitMQ's management UI and API on 127.0.0.1:15672.",
	"GRIDCRAWL_PEERS_VENV":          "The Python venv with Scrapy for the peer comparison (`scripts/bench -peers`).",
	"GRIDCRAWL_YACYCLIENT_DIR":      "Where `scripts/yacyclient/setup.sh` installs searx's YaCy client.",
	// Tests.
	"GRIDCRAWL_REQUIRE_BACKENDS":      "`1`: tests against real backends (and the browser and YaCy client tests) fail instead of skipping when a backend is not configured. `make test` sets it; so does `CI=true`.",
	"GRIDCRAWL_REQUIRE_BROWSER":       "`1`: the dashboard's browser tests fail instead of skipping when no browser starts (`make test` sets it).",
	"GRIDCRAWL_ARTIFACTS":             "Where tests put screenshots (`$GRIDCRAWL_ARTIFACTS/dashboard/*.png`); `make test` uses `artifacts/`, which is not committed.",
	"GRIDCRAWL_PYWB_VENV":             "The venv with pywb, warcio, wacz and FastWARC for the archive tests (`scripts/services/pywb.sh install`).",
	"GRIDCRAWL_BENCH_SAMPLES":         "`scripts/bench -wacz`: print every memory sample of the export, not only the quarters.",
	"GRIDCRAWL_BENCH_REBUILD_RECORDS": "`BenchmarkRebuild` (services/internal/loader/queueing): how many to-be-loaded records the shard being rebuilt holds (default 100000).",
	"GRIDCRAWL_REPLAYWEB_DIR":         "The unpacked npm package replaywebpage for the WACZ replay test in a browser (`scripts/services/replayweb.sh install`).",
	"GRIDCRAWL_SEARX_PYTHON":          "The Python of the venv with searx's YaCy client (`eval \"$(scripts/yacyclient/setup.sh)\"` prints it); unset, the YaCy client test installs it under `make test` and in CI, and skips otherwise.",
	"GRIDCRAWL_RESTART_BROKER":        "`1` runs the grid-mode test that restarts RabbitMQ mid-crawl (`make test` runs it alone after everything else).",
	"GRIDCRAWL_AMQP_RESTART_TEST":     "`1` runs the queue test that restarts RabbitMQ (`make test` runs it alone after everything else).",
	"GRIDCRAWL_OUTAGE":                "How long the backend outage test keeps each backend away (a duration, default `30s`).",
	"GRIDCRAWL_TEST_LOGS":             "A directory where a failed grid-mode test leaves the logs of its processes.",
}

// computedDefaults are the values code gives a variable left empty, where
// no envDefault tag says so (the value depends on the host or the service).
// The page shows them in the default column; the test fails on a key that
// names no variable.
var computedDefaults = map[string]string{
	"GRIDCRAWL_LOADER_ID":            "loader-<host name>-<pid>",
	"GRIDCRAWL_AMQP_CONNECTION_NAME": "gridcrawl-<service>",
}

// addenda add to a variable's doc comment what a reader of the page needs
// and the comment, written for the code, does not say. The test fails on a
// key that names no variable.
var addenda = map[string]string{
	"GRIDCRAWL_RESOLVE": "For development and tests: comma-separated `host=ip` overrides and `*.suffix=ip` wildcards, like curl's `--resolve`.",
}
