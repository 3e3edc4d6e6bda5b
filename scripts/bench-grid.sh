#!/usr/bin/env bash
# Grid-mode benchmark: starts the local real backends if needed (stopping
# those it started afterwards), then crawls the simulated web with MCP, two
# loaders and two crawlers as separate processes.
set -euo pipefail
cd "$(dirname "$0")/.."
answering() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
started=()
for b in rabbitmq:5672 elasticsearch:9200 minio:9000; do
	answering "${b#*:}" || started+=("${b%%:*}")
done
cleanup() { if [ "${#started[@]}" -gt 0 ]; then scripts/services/down.sh "${started[@]}" >&2 || true; fi; }
trap cleanup EXIT
eval "$(scripts/services/up.sh)"
go build -o bin/ ./services/...
go run ./scripts/bench -grid-mode -hosts "${HOSTS:-1000}" -pages "${PAGES:-20}" "$@"
