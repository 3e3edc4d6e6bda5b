#!/usr/bin/env bash
# Regression guard for the pipeline's cost (make bench-check; not part of
# make test): crawls a short simulated web embedded and in grid mode and
# fails when CPU-ms per page is worse than the figure recorded in
# docs/benchmarks.md (the line starting "bench-check:") by more than the
# recorded noise band. Run it before every submission that touches the
# pipeline, with nothing else running on the machine: two CPU-bound jobs on
# two cores measure each other, not the code. Starts the local backends if
# needed (stopping those it started afterwards).
#
#   RUNS    runs of each benchmark; the lowest figure counts (default 2)
#   ONLY    embedded or grid: run one of the two
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-2}
only=${ONLY:-}

line=$(grep -m1 '^bench-check:' docs/benchmarks.md) || { echo "docs/benchmarks.md has no 'bench-check:' line" >&2; exit 2; }
recorded() { sed -n "s/.*\b$1 \([0-9.]*\).*/\1/p" <<<"$line"; }
want_embedded=$(recorded embedded)
want_grid=$(recorded grid)
band=$(recorded band)
[ -n "$want_embedded" ] && [ -n "$want_grid" ] && [ -n "$band" ] || { echo "cannot read '$line'" >&2; exit 2; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
go build -o bin/ ./services/...
go build -o bin/bench ./scripts/bench

# lowest prints the lowest of the figures after "$1" in the benchmark's
# output lines.
lowest() { sed -n "s/.*$1 \([0-9.]*\).*/\1/p" | sort -g | head -n1; }

fail=0
check() { # name measured recorded
	local verdict
	verdict=$(awk -v got="$2" -v want="$3" -v band="$band" 'BEGIN {
		limit = want * (1 + band / 100)
		printf "%s cpu-ms/page %.3f, recorded %.3f, limit %.3f (+%s%%): %s\n", "'"$1"'", got, want, limit, band, (got <= limit ? "ok" : "WORSE")
		exit (got <= limit ? 0 : 1) }') || fail=1
	echo "$verdict"
}

if [ "$only" != grid ]; then
	out=$(for _ in $(seq "$runs"); do bin/bench -hosts 300 -pages 20 -page-bytes 20480 -min-delay-ms 10; done)
	echo "$out" | grep -E 'cpu-ms/page|pages/s'
	check embedded "$(echo "$out" | grep 'grid cpu' | lowest 'cpu-ms\/page')" "$want_embedded"
fi

if [ "$only" != embedded ]; then
	answering() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
	started=()
	for b in rabbitmq:5672 elasticsearch:9200 minio:9000; do
		answering "${b#*:}" || started+=("${b%%:*}")
	done
	cleanup() { if [ "${#started[@]}" -gt 0 ]; then scripts/services/down.sh "${started[@]}" >&2 || true; fi; }
	trap cleanup EXIT
	eval "$(scripts/services/up.sh)"
	out=$(for _ in $(seq "$runs"); do bin/bench -grid-mode -hosts 300 -pages 20; done)
	echo "$out" | grep -E 'all services|pages/s|realtime gets|broker messages'
	check grid "$(echo "$out" | grep 'all services' | lowest 'cpu-ms\/page')" "$want_grid"
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $fail
