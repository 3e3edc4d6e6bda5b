#!/usr/bin/env bash
# Regression guard of the pipeline's cost (make bench-check; not part of
# make test): crawls a short simulated web embedded and in grid mode and
# fails when a figure is worse than the one recorded in docs/benchmarks.md
# (the line starting "bench-check:") by more than its band. Run it before
# every submission that touches a stage, a store or a backend call, with
# nothing else running on the machine: two CPU-bound jobs on two cores
# measure each other, not the code. Starts the local backends if needed
# (stopping those it started afterwards).
#
# Figures, each compared with its band:
#   embedded  cpu-ms/page of the grid process; pages/s
#   grid      cpu-ms/page of all services; pages/s; CPU-ms per page of
#             Elasticsearch (net of its idle rate), RabbitMQ and MinIO;
#             Elasticsearch gets per page by its own count (realtime and
#             refreshed) and, where the bench prints them, the realtime
#             gets and searches the services sent
# A figure that a tree's bench does not print (an older one) is reported
# and not compared.
#
#   RUNS    runs of each benchmark (default 2); the median counts
#   WARMUP  grid-mode runs before the measured ones, not counted (default
#           1): a node's first minutes cost Elasticsearch two to three
#           times a warm node's CPU per page (its JIT compiler), which the
#           first of the in-turn runs would pay alone
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
# recorded NAME prints the figure after NAME on the line ("" when absent).
recorded() { awk -v n="$1" '{ for (i = 2; i < NF; i++) if ($i == n) { print $(i + 1); exit } }' <<<"$line"; }
band=$(recorded band)
[ -n "$band" ] || { echo "cannot read the band of '$line'" >&2; exit 2; }

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

# figures MODE reads one benchmark's output and prints "name value" for
# each figure it holds.
figures() {
	awk -v mode="$1" '
		function after(s, re,   t) { if (match(s, re)) { t = substr(s, RSTART, RLENGTH); sub(/.* /, "", t); return t } return "" }
		/pages\/s [0-9.]+/ && /^wall/ { print "pages/s", after($0, "pages/s [0-9.]+") }
		mode == "embedded" && /^grid cpu/ { print "cpu-ms/page", after($0, "cpu-ms/page [0-9.]+") }
		mode == "grid" && /^all services: cpu-ms\/page/ { print "cpu-ms/page", after($0, "cpu-ms/page [0-9.]+") }
		/^  backend [a-z]+ / && /net of its idle rate before the crawl [0-9.]+/ {
			print $2 "-cpu-ms/page", after($0, "before the crawl [0-9.]+") }
		/^elasticsearch (realtime )?gets per page/ { print "es-gets/page", after($0, ": [0-9.]+") }
		/^elasticsearch reads per page, as the services sent them/ {
			print "es-realtime-gets/page", after($0, "realtime-get [0-9.]+")
			print "es-searches/page", after($0, "search [0-9.]+") }
	'
}

# band_of NAME prints the band (percent) and the absolute slack of a figure:
# backends' CPU and read counts are small numbers whose noise a percentage
# alone would call a regression.
band_of() {
	case $1 in
	cpu-ms/page | pages/s) echo "$band 0" ;;
	*-cpu-ms/page) echo "${BACKEND_BAND:-$(recorded backend-band)} 0.05" ;;
	es-*) echo "${READS_BAND:-$(recorded reads-band)} 0.02" ;;
	esac
}

fail=0
# compare MODE NAME MINE REF REFNAME: lower is better but for pages/s.
compare() {
	local mode=$1 name=$2 mine=$3 ref=$4 refname=$5
	if [ -z "$ref" ] || [ -z "$mine" ]; then
		printf '%-9s %-24s this %-8s %s %-8s: not compared\n' "$mode" "$name" "${mine:--}" "$refname" "${ref:--}"
		return
	fi
	read -r pct slack < <(band_of "$name")
	awk -v mode="$mode" -v name="$name" -v got="$mine" -v want="$ref" -v pct="${pct:-20}" -v slack="$slack" -v ref="$refname" 'BEGIN {
		if (name == "pages/s") { limit = want * (1 - pct / 100); ok = got >= limit; rel = ">=" }
		else { limit = want * (1 + pct / 100) + slack; ok = got <= limit; rel = "<=" }
		printf "%-9s %-24s this %.3f, %s %.3f, limit %s %.3f: %s\n", mode, name, got, ref, want, rel, limit, (ok ? "ok" : "WORSE")
		exit (ok ? 0 : 1) }' || fail=1
}

# median NAME FILE prints the median of the figure NAME in FILE.
median() {
	awk -v n="$1" '$1 == n && $2 != "" { print $2 }' "$2" | sort -g |
		awk '{v[NR] = $1} END { if (NR == 0) exit; if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# measure MODE BENCH-ARGS...: runs the benchmark RUNS times (with BASE's
# in turn) and compares each figure's median with the recorded one or
# BASE's.
measure() {
	local mode=$1
	shift
	local mine theirs out
	mine=$(mktemp) theirs=$(mktemp)
	for i in $(seq "$runs"); do
		if [ -n "$base" ]; then
			out=$(cd "$basedir" && bin/bench "$@")
			echo "$out" | figures "$mode" >>"$theirs"
			echo "$base, run $i: $(echo "$out" | figures "$mode" | paste -sd' ')"
		fi
		out=$(bin/bench "$@")
		echo "$out" | figures "$mode" >>"$mine"
		echo "this tree, run $i: $(echo "$out" | figures "$mode" | paste -sd' ')"
	done
	local names
	names=$(cut -d' ' -f1 "$mine" "$theirs" | sort -u)
	for name in $names; do
		if [ -n "$base" ]; then
			compare "$mode" "$name" "$(median "$name" "$mine")" "$(median "$name" "$theirs")" "$base in turn"
		else
			compare "$mode" "$name" "$(median "$name" "$mine")" "$(recorded "$mode-$name")" recorded
		fi
	done
	rm -f "$mine" "$theirs"
}

if [ "$only" != grid ]; then
	measure embedded -hosts 300 -pages 20 -page-bytes 20480 -min-delay-ms 10
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
	for _ in $(seq "${WARMUP:-1}"); do
		echo "warm-up run (not counted): $(bin/bench -grid-mode -hosts 300 -pages 20 | figures grid | paste -sd' ')"
	done
	measure grid -grid-mode -hosts 300 -pages 20
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $fail
