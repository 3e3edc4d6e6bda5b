#!/usr/bin/env bash
# Runs every test of the repository with the race detector. Used by
# `make test` and therefore by CI (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
test -z "$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
go vet ./...
go test -race -count=1 -timeout 30m ./... 2>&1 | tee /tmp/gridcrawl-test.log
