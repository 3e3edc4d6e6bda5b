# gridcrawl — see README.md. Every target works on a fresh machine with Go.
GO      ?= go
BIN     := bin
DATA    ?= ./data
PKGS    := ./...
# VERSION is stamped into the binaries (grid version): git describe, with
# -dirty for a modified tree; a build outside a git checkout has none.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null)
LDFLAGS := -X github.com/gridcrawl/gridcrawl/services/internal/svc.stamp=$(VERSION)

.PHONY: run demo test fuzz soak build lint bench clean services-up services-down cluster-up cluster-down

## run: the whole grid in one process on embedded backends (data in $(DATA))
run: build
	$(BIN)/grid up --data $(DATA)

## demo: serve the bundled multi-host demo site on loopback and crawl it
demo: build
	scripts/demo.sh

## fuzz: every fuzz target for FUZZTIME each (default 30s), one after another (about
## 29 targets: 15 minutes and more); not part of make test, which runs the saved inputs
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

## soak: grid mode on real backends for 30 minutes with a service killed every 3 minutes
## (SOAKFLAGS=-short: about 3 minutes); not part of make test
soak:
	scripts/soak.sh $(SOAKFLAGS)

## soak-render: the embedded grid renders 5,000 pages of scripted sites in headless Chromium
## (GRIDCRAWL_CHROMIUM; the browser restarts about 10 times) and fails unless every page is indexed,
## none requested twice, and the grid's and the browser's memory stay flat; RENDERFLAGS=-render-out DIR
## keeps the samples and the log; not part of make test
.PHONY: soak-render
soak-render: build
	$(GO) run ./scripts/bench -render-soak $(RENDERFLAGS)

## test-cluster: the cluster test on the local RabbitMQ, Elasticsearch and MinIO clusters
## (scripts/cluster/cluster.sh, no Docker): a 20,000-page crawl with two loaders and two crawlers,
## one node of each cluster killed -9 mid-crawl and started after 30 s, then the same with the nodes
## left down; fails unless every service stays up, the crawl finishes, every page is fetched and
## indexed once, politeness holds, nothing is dead-lettered, the termination query agrees with MCP
## and every WARC segment and CDXJ line reads back (scripts/cluster-test.sh; CLUSTERFLAGS: more
## soak flags or --keep-clusters); not part of make test
.PHONY: test-cluster scale-curve
test-cluster:
	scripts/cluster-test.sh $(CLUSTERFLAGS)

## scale-curve: pages/s with 1, 2 and 4 loader+crawler pairs on the clusters over one web, no kills,
## as a table (SCALEFLAGS=--small: a quick check that it runs; figures need a quiet machine)
scale-curve:
	scripts/cluster-test.sh scale-curve $(SCALEFLAGS)

## build: all binaries into bin/
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./services/...

## test: every test with the race detector, on real RabbitMQ, Elasticsearch, MinIO, Chromium
## and pywb (started if missing), the broker-restart and full-size huge-page runs; no fuzzing
## (make fuzz) and no soak (make soak); meant to take under 30 minutes on 2 cores
test:
	scripts/test.sh

## lint: gofmt, go vet
lint:
	@test -z "$$(gofmt -l .)" || (echo "gofmt needed:"; gofmt -l .; exit 1)
	$(GO) vet $(PKGS)

## bench: crawl a simulated web of 1,000 hosts on the embedded grid, then on the grid
## (mcp, 2 loaders, 2 crawlers as processes on RabbitMQ, Elasticsearch and MinIO)
bench: build
	$(GO) run ./scripts/bench -hosts 1000
	scripts/bench-grid.sh

## bench-check: regression guard (a short embedded and grid-mode crawl) of CPU-ms per page, pages/s,
## each backend's CPU and Elasticsearch reads per page against the figures recorded in
## docs/benchmarks.md, or with BASE=<rev> against that revision run in turn; run it alone on the
## machine before any submission that touches a stage, a store or a backend call; not part of make test
.PHONY: bench-check
bench-check:
	scripts/bench-check.sh

## bench-due: the cost per due URL of finding due work (recrawl) in continuous crawls of 10,000 to
## 1,000,000 records, in SQLite and (when GRIDCRAWL_ES_URL is set) Elasticsearch
.PHONY: bench-due
bench-due:
	scripts/bench-due.sh

clean:
	rm -rf $(BIN)

## services-up: install (if missing) and start local RabbitMQ, Elasticsearch and MinIO (no Docker)
services-up:
	scripts/services/up.sh

## services-down: stop the local backends started by services-up
services-down:
	scripts/services/down.sh

## cluster-up: install (if missing) and start the local clusters (3 RabbitMQ, 3 Elasticsearch and
## 4 MinIO nodes on 127.0.0.1, no Docker) and print their env lines; docs/clusters.md
cluster-up:
	scripts/cluster/cluster.sh up

## cluster-down: stop the cluster nodes started by cluster-up (data kept)
cluster-down:
	scripts/cluster/cluster.sh down
