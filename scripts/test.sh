#!/usr/bin/env bash
# Runs every test of the repository, with the race detector, including the
# tests against real RabbitMQ, Elasticsearch and MinIO: backends that are not
# running are installed and started through scripts/services/up.sh (no
# Docker) and stopped again at the end; ones already running are reused and
# left running. A backend that cannot start fails the run. Debian's chromium
# is installed for the dashboard's browser test the same way, and a browser
# that cannot start fails the run too. Screenshots of the browser test go to
# $GRIDCRAWL_ARTIFACTS/dashboard (default: artifacts/ in the repository,
# ignored by git). Used by `make test` and therefore by CI (.ci/run), which
# gives it 90 minutes on 2 cores; the goal is under 30 on such a machine.
set -euo pipefail
cd "$(dirname "$0")/.."

test -z "$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
go vet ./...

# Which backends answer already? Those are not ours to stop.
answering() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
started=()
for b in rabbitmq:5672 elasticsearch:9200 minio:9000; do
	answering "${b#*:}" || started+=("${b%%:*}")
done
cleanup() {
	if [ "${#started[@]}" -gt 0 ]; then
		scripts/services/down.sh "${started[@]}" >&2 || true
	fi
}
trap cleanup EXIT

env_lines=$(scripts/services/up.sh)
eval "$env_lines"
export GRIDCRAWL_REQUIRE_BACKENDS=1
scripts/services/chromium.sh install
scripts/services/chromium.sh check
eval "$(scripts/services/chromium.sh env)"
scripts/services/pywb.sh install
scripts/services/pywb.sh check
eval "$(scripts/services/pywb.sh env)"
export GRIDCRAWL_PYWB_VENV
scripts/services/replayweb.sh install
scripts/services/replayweb.sh check
eval "$(scripts/services/replayweb.sh env)"
export GRIDCRAWL_REPLAYWEB_DIR
export GRIDCRAWL_CHROMIUM GRIDCRAWL_REQUIRE_BROWSER=1
export GRIDCRAWL_ARTIFACTS="${GRIDCRAWL_ARTIFACTS:-$PWD/artifacts}"

go test -race -count=1 -timeout 40m ./...
# Restarting the broker disrupts every other user of it: these run alone.
GRIDCRAWL_RESTART_BROKER=1 GRIDCRAWL_AMQP_RESTART_TEST=1 \
	go test -race -count=1 -timeout 15m -run 'BrokerRestart' ./services/internal/grid ./pkg/amqpqueue
# The race detector makes the largest inputs too slow, so -race runs shrink
# them (pkg/extract's 100 MiB pages become 10 MiB): run those at full size
# without it.
go test -count=1 -timeout 10m -run 'TestHugePage|TestHugeText' ./pkg/extract
# No fuzzing here: the inputs every fuzz target has saved under testdata/fuzz
# (and its f.Add seeds) already ran as regression cases in `go test` above.
# Fuzzing itself, which builds an instrumented binary per target, is
# `make fuzz`; the soak is `make soak`.
