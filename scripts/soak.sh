#!/usr/bin/env bash
# Soak run: starts the local real backends if needed (stopping those it
# started afterwards), builds the services, then runs scripts/soak: MCP, two
# loaders and two crawlers on RabbitMQ, Elasticsearch and MinIO over a
# 100,000-page simulated web for 30 minutes, a random service killed with
# SIGKILL every 3 minutes. -short: about 3 minutes, 5,000 pages, one kill.
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
go run ./scripts/soak "$@"
