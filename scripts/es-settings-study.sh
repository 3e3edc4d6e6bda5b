#!/usr/bin/env bash
# Runs the grid-mode benchmark with Elasticsearch index settings applied to
# the benchmark's indices through an index template, for the settings study
# in docs/benchmarks.md. Each run's output is kept in $OUT (default
# /tmp/es-settings-study); the benchmark's indices are deleted after each run.
# Run it alone on the machine, with the backends up (scripts/services/up.sh)
# and the binaries built (go build -o bin/ ./services/... ./scripts/bench).
#
#   scripts/es-settings-study.sh NAME [SETTINGS_JSON [INDEX_PATTERN]]
#
#   scripts/es-settings-study.sh base
#   scripts/es-settings-study.sh refresh30s '{"index.refresh_interval":"30s"}'
#   scripts/es-settings-study.sh async '{"index.translog.durability":"async"}'
#   scripts/es-settings-study.sh web30s '{"index.refresh_interval":"30s"}' 'gridbench-*-web'
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1 settings=${2:-} pattern=${3:-gridbench-*}
es=${GRIDCRAWL_ES_URL:?export what scripts/services/up.sh prints}
out=${OUT:-/tmp/es-settings-study}
mkdir -p "$out"
template="$es/_index_template/gridcrawl-settings-study"
cleanup() {
	curl -fsS -XDELETE "$template" >/dev/null 2>&1 || true
	for i in $(curl -fsS "$es/_cat/indices?h=index" | grep '^gridbench-' || true); do
		curl -fsS -XDELETE "$es/$i" >/dev/null
	done
}
trap cleanup EXIT
cleanup
if [ -n "$settings" ]; then
	curl -fsS -XPUT "$template" -H 'content-type: application/json' \
		-d "{\"index_patterns\":[\"$pattern\"],\"priority\":1,\"template\":{\"settings\":$settings}}" >/dev/null
fi
echo "== $name $pattern ${settings:-(defaults)}; load average $(cut -d' ' -f1-3 /proc/loadavg)"
bin/bench -grid-mode -hosts "${HOSTS:-1000}" -pages "${PAGES:-20}" >"$out/$name.out"
grep -E 'pages/s|all services|realtime gets|elasticsearch cpu-ms/page' "$out/$name.out"
