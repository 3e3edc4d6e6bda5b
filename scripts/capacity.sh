#!/usr/bin/env bash
# Capacity figures (docs/scaling.md): starts the local real backends if
# needed (stopping those it started afterwards), builds the services, then
# crawls a simulated web of 20 KB pages (10,000 pages on 100 hosts, 8 links a
# page, 2 of them to other hosts) with MCP, two loaders and two crawlers as
# processes, no kills, and prints per page fetched: Elasticsearch bytes per
# document of each index (before and after a force merge), Elasticsearch
# writes, queries and gets, transaction records, WARC and CDXJ bytes in
# MinIO, broker publishes by queue and backend operations by the services'
# own counters. Sizes and counts, not times: other load does not change them.
# Runs on the backends of the environment (GRIDCRAWL_AMQP_URL, ...) when set,
# else on the single-node ones of scripts/services. Flags go to scripts/soak
# (given ones win over the presets below).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${GRIDCRAWL_ES_URL:-}" ]; then
	answering() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
	started=()
	for b in rabbitmq:5672 elasticsearch:9200 minio:9000; do
		answering "${b#*:}" || started+=("${b%%:*}")
	done
	cleanup() { if [ "${#started[@]}" -gt 0 ]; then scripts/services/down.sh "${started[@]}" >&2 || true; fi; }
	trap cleanup EXIT
	eval "$(scripts/services/up.sh)"
fi
go build -o bin/ ./services/...
go run ./scripts/soak -capacity -pages 10000 -hosts 100 -min-delay-ms 500 -kill-every 0 -duration 1m -drain 10m \
	-recrawl=false -archive-check=false -sample 10s "$@"
