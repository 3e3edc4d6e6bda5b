#!/usr/bin/env bash
# Serves the bundled multi-host demo site on loopback, runs the embedded grid
# (grid up) on a new temporary data directory, crawls the site there and
# searches the result. Everything stays on this machine. On a terminal the
# grid then serves its dashboard until Ctrl-C; without one it stops at once.
# The site, the grid and the data directory are removed on every exit.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/ ./services/grid ./scripts/demosite
data=$(mktemp -d -t gridcrawl-demo.XXXXXX)
site='' grid='' serving=''
cleanup() {
	for pid in $grid $site; do kill "$pid" 2>/dev/null || true; done
	for pid in $grid $site; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$data"
}
trap cleanup EXIT
# Ctrl-C ends the demo: the way out once the dashboard is served.
trap 'if [ -n "$serving" ]; then exit 0; fi; exit 130' INT
trap 'exit 143' TERM

# The demo site is on this machine, which the loader refuses unless allowed.
export GRIDCRAWL_ALLOW_NETS=loopback
bin/demosite -print-env >"$data/site.env" &
site=$!
for _ in $(seq 50); do grep -q GRIDCRAWL_DEMO_START_URL= "$data/site.env" && break; sleep 0.1; done
set -a; . "$data/site.env"; set +a

mkdir "$data/grid"
bin/grid up --data "$data/grid" --listen 127.0.0.1:0 2>"$data/grid.log" &
grid=$!
for _ in $(seq 600); do
	[ -s "$data/grid/grid.addr" ] && break
	if ! kill -0 "$grid" 2>/dev/null; then
		cat "$data/grid.log" >&2
		exit 1
	fi
	sleep 0.1
done
api=$(cat "$data/grid/grid.addr")
echo "demo site: $GRIDCRAWL_DEMO_START_URL; grid: $api (data in $data, removed when the demo ends)"

bin/grid crawl --data "$data/grid" --depth 4 --scope domain --min-delay-ms 20 "$GRIDCRAWL_DEMO_START_URL"
bin/grid status --data "$data/grid"
bin/grid search --data "$data/grid" --limit 5 gridcrawl

if [ -t 0 ]; then
	serving=1
	echo "dashboard: $api/ (served until you press Ctrl-C; then the demo's site, grid and data are removed)"
	wait "$grid"
	echo "the grid stopped:" >&2
	tail -5 "$data/grid.log" >&2
	exit 1
fi
echo "no terminal to wait on: the grid stops now and the demo's data is removed (run make demo in a terminal to browse the dashboard)"
