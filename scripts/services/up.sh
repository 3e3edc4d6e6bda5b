#!/usr/bin/env bash
# Installs (if missing), starts (if not running) and checks gridcrawl's local real backends: RabbitMQ,
# Elasticsearch and MinIO, without Docker. A backend that already answers on its port (started by us
# earlier or by the user) is reused. Prints the backends' environment variables on stdout, everything
# else on stderr, so that
#
#   eval "$(scripts/services/up.sh)"
#
# exports them for gridcrawl and its tests (lines read `export GRIDCRAWL_...=...`; each backend script's
# `env` command prints the same variables without `export`, for .env files). Exits non-zero, naming the
# backend, when one cannot be brought up. Arguments select a subset (default: rabbitmq elasticsearch
# minio). All state lives under ${GRIDCRAWL_SERVICES_DIR:-$HOME/.cache/gridcrawl-services};
# scripts/services/down.sh stops what we started.
set -euo pipefail

GC_NAME=up
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"

all=(rabbitmq elasticsearch minio)
if [ "$#" -gt 0 ]; then services=("$@"); else services=("${all[@]}"); fi
for s in "${services[@]}"; do
	case " ${all[*]} " in *" $s "*) ;; *) die "unknown backend '$s' (known: ${all[*]})" ;; esac
done

# step BACKEND CMD runs scripts/services/BACKEND.sh CMD with its stdout sent to stderr, timing it.
step() {
	local t0=$SECONDS rc=0
	"$here/$1.sh" "$2" >&2 || rc=$?
	if [ "$rc" -ne 0 ]; then
		die "backend $1 could not be brought up: '$1.sh $2' failed (exit $rc)"
	fi
	log "$1 $2: $((SECONDS - t0))s"
}

total=$SECONDS
# Which backends already answer (ours or the user's)? Those are only checked.
declare -A reuse=()
for s in "${services[@]}"; do
	if "$here/$s.sh" status 2>/dev/null; then reuse[$s]=1; fi
done
want() { case " ${services[*]} " in *" $1 "*) [ -z "${reuse[$1]:-}" ] ;; *) false ;; esac; }

# The MinIO build (minutes when cold) runs in the background, in its own process group, while the other
# backends are installed and started; a failure elsewhere stops it.
build_pid=""
stop_build() {
	if [ -n "$build_pid" ] && kill -0 "$build_pid" 2>/dev/null; then
		kill -TERM -- "-$build_pid" 2>/dev/null || true
	fi
}
trap stop_build EXIT
if want minio; then
	log "building/installing minio in the background"
	build_t0=$SECONDS
	setsid "$here/minio.sh" install >&2 &
	build_pid=$!
fi
for s in rabbitmq elasticsearch; do
	want "$s" || continue
	step "$s" install
done
# RabbitMQ boots in the background while Elasticsearch's start (which blocks until the node is up) runs.
for s in rabbitmq elasticsearch; do
	want "$s" || continue
	step "$s" start
done
if [ -n "$build_pid" ]; then
	rc=0
	wait "$build_pid" || rc=$?
	build_pid=""
	[ "$rc" -eq 0 ] || die "backend minio could not be brought up: 'minio.sh install' failed (exit $rc)"
	log "minio install (background): $((SECONDS - build_t0))s"
	step minio start
fi
for s in "${services[@]}"; do
	if [ -n "${reuse[$s]:-}" ]; then log "$s was already running; reusing it"; fi
done
for s in "${services[@]}"; do
	step "$s" check
done
log "all up in $((SECONDS - total))s: ${services[*]}"
# `export` so that eval passes the variables on to child processes (go test, make).
for s in "${services[@]}"; do
	"$here/$s.sh" env | sed 's/^/export /'
done
