#!/usr/bin/env bash
# Serves the bundled multi-host demo site on loopback and crawls it with the
# embedded grid, then searches the result. Everything stays on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
data=$(mktemp -d -t gridcrawl-demo.XXXXXX)
envfile="$data/site.env"
go build -o bin/ ./services/grid ./scripts/demosite
bin/demosite -print-env >"$envfile" &
site=$!
trap 'kill $site 2>/dev/null; wait $site 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$envfile" ] && grep -q GRIDCRAWL_DEMO_START_URL= "$envfile" && break; sleep 0.1; done
set -a; . "$envfile"; set +a
echo "demo site: $GRIDCRAWL_DEMO_START_URL (data in $data)"
GRIDCRAWL_ALLOW_NETS=127.0.0.0/8 bin/grid crawl --data "$data" --depth 4 --scope domain --min-delay-ms 20 "$GRIDCRAWL_DEMO_START_URL"
bin/grid status --data "$data"
bin/grid search --data "$data" --limit 5 gridcrawl
