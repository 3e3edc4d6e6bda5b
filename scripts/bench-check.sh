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
#   BASE    a git revision: instead of the recorded figures, build BASE
#           into a temporary worktree and run its benchmarks in turn with
#           this tree's (base, this, base, this ...); fail when this
#           tree's median is worse than BASE's by more than the band. The
#           machine's speed drifts over a day (on 2026-11-27 one tree's
#           embedded figure went from 1.52 to 1.80 between two hours), which
#           in-turn runs cancel and a recorded figure cannot.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-2}
only=${ONLY:-}
base=${BASE:-}

line=$(grep -m1 '^bench-check:' docs/benchmarks.md) || { echo "docs/benchmarks.md has no 'bench-check:' line" >&2; exit 2; }
recorded() { sed -n "s/.*\b$1 \([0-9.]*\).*/\1/p" <<<"$line"; }
want_embedded=$(recorded embedded)
want_grid=$(recorded grid)
band=$(recorded band)
[ -n "$want_embedded" ] && [ -n "$want_grid" ] && [ -n "$band" ] || { echo "cannot read '$line'" >&2; exit 2; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
go build -o bin/ ./services/...
go build -o bin/bench ./scripts/bench
basedir=
if [ -n "$base" ]; then
	basedir=$(mktemp -d)
	git worktree add --detach -q "$basedir" "$base"
	(cd "$basedir" && go build -o bin/ ./services/... && go build -o bin/bench ./scripts/bench)
fi
removebase() { if [ -n "$basedir" ]; then git worktree remove --force "$basedir" || true; fi; }
trap removebase EXIT

# lowest prints the lowest of the figures after "$1" in the benchmark's
# output lines; median their median.
lowest() { sed -n "s/.*$1 \([0-9.]*\).*/\1/p" | sort -g | head -n1; }
median() { sed -n "s/.*$1 \([0-9.]*\).*/\1/p" | sort -g | awk '{v[NR] = $1} END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# measure NAME FIGURE RECORDED BENCH-ARGS...: runs the benchmark RUNS times
# and checks the figure (the line's pattern) against the recorded one, or
# with BASE runs BASE's benchmark in turn and checks against its median.
measure() {
	local name=$1 pattern=$2 want=$3
	shift 3
	if [ -z "$base" ]; then
		local out
		out=$(for _ in $(seq "$runs"); do bin/bench "$@"; done)
		echo "$out" | grep -E 'cpu-ms/page|pages/s|realtime gets|broker messages'
		check "$name" "$(echo "$out" | grep "$pattern" | lowest 'cpu-ms\/page')" "$want"
		return
	fi
	local mine='' theirs=''
	for _ in $(seq "$runs"); do
		theirs+=$(cd "$basedir" && bin/bench "$@" | grep "$pattern")$'\n'
		mine+=$(bin/bench "$@" | grep "$pattern")$'\n'
	done
	echo "$base:"; echo -n "$theirs"
	echo "this tree:"; echo -n "$mine"
	check "$name (median)" "$(echo -n "$mine" | median 'cpu-ms\/page')" "$(echo -n "$theirs" | median 'cpu-ms\/page')" "$base in turn"
}

fail=0
check() { # name measured reference [what the reference is]
	local verdict
	verdict=$(awk -v got="$2" -v want="$3" -v band="$band" -v ref="${4:-recorded}" 'BEGIN {
		limit = want * (1 + band / 100)
		printf "%s cpu-ms/page %.3f, %s %.3f, limit %.3f (+%s%%): %s\n", "'"$1"'", got, ref, want, limit, band, (got <= limit ? "ok" : "WORSE")
		exit (got <= limit ? 0 : 1) }') || fail=1
	echo "$verdict"
}

if [ "$only" != grid ]; then
	measure embedded 'grid cpu' "$want_embedded" -hosts 300 -pages 20 -page-bytes 20480 -min-delay-ms 10
fi

if [ "$only" != embedded ]; then
	answering() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
	started=()
	for b in rabbitmq:5672 elasticsearch:9200 minio:9000; do
		answering "${b#*:}" || started+=("${b%%:*}")
	done
	cleanup() { if [ "${#started[@]}" -gt 0 ]; then scripts/services/down.sh "${started[@]}" >&2 || true; fi; }
	trap 'cleanup; removebase' EXIT
	eval "$(scripts/services/up.sh)"
	measure grid 'all services' "$want_grid" -grid-mode -hosts 300 -pages 20
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $fail
