#!/usr/bin/env bash
# Due-work benchmark (recrawl): the cost per due URL of finding
# due work in continuous crawls of RECORDS records (default 10,000, 100,000
# and 1,000,000), 1% of them due, in SQLite and, when GRIDCRAWL_ES_URL names
# an Elasticsearch (eval "$(scripts/services/up.sh)"), in Elasticsearch.
# See BenchmarkDue in pkg/sqlitestore and pkg/esindex for what each line
# measures. The SQLite databases are kept in the system's temporary
# directory between runs (about 1.2 GB for 1,000,000 records; DUE_CACHE=false
# builds them afresh in the benchmark's temporary directory); each
# Elasticsearch size is loaded into an index of its own, deleted afterwards.
#
#	make bench-due
#	RECORDS=100000 BENCHTIME=5s scripts/bench-due.sh
set -euo pipefail
cd "$(dirname "$0")/.."
records=${RECORDS:-10000,100000,1000000}
benchtime=${BENCHTIME:-2s}
cache=${DUE_CACHE:-true}
loadavg() { echo "load average $1: $(cut -d' ' -f1-3 /proc/loadavg)"; }
loadavg before
go test -run '^$' -bench '^BenchmarkDue$' -benchtime "$benchtime" -timeout 0 ./pkg/sqlitestore/ \
	-due.records "$records" -due.cache="$cache"
loadavg "after SQLite"
if [ -z "${GRIDCRAWL_ES_URL:-}" ]; then
	echo "GRIDCRAWL_ES_URL is not set: Elasticsearch skipped (start it with: eval \"\$(scripts/services/up.sh)\")"
	exit 0
fi
go test -run '^$' -bench '^BenchmarkDue$' -benchtime "$benchtime" -timeout 0 ./pkg/esindex/ -due.records "$records"
loadavg "after Elasticsearch"
