#!/usr/bin/env bash
# Local MinIO for gridcrawl development and tests, without Docker.
#
#   scripts/services/minio.sh {install|start|check|stop|env|status}
#
# install  builds the pinned MinIO server with `go install` into $GRIDCRAWL_SERVICES_DIR/bin (reused when
#          the binary there was built from the pinned version; a cold build takes several minutes).
# start    single-drive server on 127.0.0.1:9000 (console 127.0.0.1:9001), fixed development
#          credentials, data in $GRIDCRAWL_SERVICES_DIR/minio/data. A MinIO already answering on
#          127.0.0.1:9000 (ours or the user's) is reused and nothing is started.
# check    waits (bounded, GRIDCRAWL_MINIO_TIMEOUT, default 120 s) for /minio/health/live, then makes sure
#          the bucket "gridcrawl" exists (signed S3 request with curl --aws-sigv4), which also proves
#          that the credentials printed by `env` work.
# stop     SIGTERM, wait up to 30 s, then SIGKILL. Data is kept.
# env      prints the GRIDCRAWL_S3_* variables.
set -euo pipefail

GC_NAME=minio
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MINIO_MODULE=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
MINIO_HOST=127.0.0.1
MINIO_PORT=9000
MINIO_CONSOLE_PORT=9001
MINIO_URL="http://$MINIO_HOST:$MINIO_PORT"
MINIO_DIR="$SERVICES_DIR/minio"
MINIO_DATA="$MINIO_DIR/data"
MINIO_LOG="$MINIO_DIR/minio.log"
MINIO_PIDFILE="$MINIO_DIR/minio.pid"
MINIO_BUILD_LOG="$MINIO_DIR/build.log"
MINIO_TIMEOUT="${GRIDCRAWL_MINIO_TIMEOUT:-120}"
# Our server's command line names our data directory; matching it ties the pid file to our server.
MINIO_ARGS=(server --address "$MINIO_HOST:$MINIO_PORT" --console-address "$MINIO_HOST:$MINIO_CONSOLE_PORT" "$MINIO_DATA")
MINIO_MARK="${MINIO_ARGS[*]}"
MINIO_ENV=()

case "$MINIO_DIR" in *[[:space:]]*) die "GRIDCRAWL_SERVICES_DIR must not contain whitespace: $SERVICES_DIR" ;; esac

# built_version prints the module version the binary was built from ("" when unknown).
built_version() {
	command -v go >/dev/null 2>&1 || return 0
	go version -m "$MINIO_BIN" 2>/dev/null | awk -v m="$MINIO_MODULE" '$1 == "mod" && $2 == m {print $3; exit}'
}

installed() {
	[ -x "$MINIO_BIN" ] || return 1
	local v
	v=$(built_version)
	# Without a go tool the version cannot be read; trust the binary we put there.
	[ -z "$v" ] && ! command -v go >/dev/null 2>&1 && return 0
	[ "$v" = "$MINIO_VERSION" ]
}

cmd_install() {
	if installed; then
		log "minio $MINIO_VERSION already built at $MINIO_BIN"
		return 0
	fi
	need_cmd go "MinIO is built from source with go install"
	mkdir -p "$SERVICES_DIR/bin" "$MINIO_DIR"
	log "building $MINIO_MODULE@$MINIO_VERSION into $SERVICES_DIR/bin (several minutes when cold; log $MINIO_BUILD_LOG)"
	local start=$SECONDS rc=0
	# Build outside any module and without inherited flags so the repo's go.mod/go.work cannot interfere.
	(cd "$MINIO_DIR" && env GOBIN="$SERVICES_DIR/bin" GOFLAGS= GOWORK=off CGO_ENABLED=0 \
		go install "$MINIO_MODULE@$MINIO_VERSION") >"$MINIO_BUILD_LOG" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ]; then
		log_tail "$MINIO_BUILD_LOG"
		die "go install $MINIO_MODULE@$MINIO_VERSION failed (exit $rc)"
	fi
	installed || die "built $MINIO_BIN but it does not report module version $MINIO_VERSION"
	log "built minio in $((SECONDS - start))s"
}

ours_running() { minio_running; }

cmd_start() {
	if ours_running; then
		log "our server is already running (pid $(read_pid "$MINIO_PIDFILE"))"
		return 0
	fi
	rm -f "$MINIO_PIDFILE"
	if minio_live; then
		log "MinIO already answers on $MINIO_URL; reusing it (not started by us)"
		return 0
	fi
	if port_open "$MINIO_HOST" "$MINIO_PORT"; then
		die "port $MINIO_HOST:$MINIO_PORT is taken by something that is not MinIO"
	fi
	if port_open "$MINIO_HOST" "$MINIO_CONSOLE_PORT"; then
		die "console port $MINIO_HOST:$MINIO_CONSOLE_PORT is already taken"
	fi
	installed || die "minio $MINIO_VERSION is not built; run: $0 install"
	mkdir -p "$MINIO_DATA"
	log "starting MinIO on $MINIO_URL (console http://$MINIO_HOST:$MINIO_CONSOLE_PORT, data $MINIO_DATA, log $MINIO_LOG)"
	minio_launch
}

cmd_check() {
	local deadline=$((SECONDS + MINIO_TIMEOUT)) idle_deadline=$((SECONDS + 15)) ours=0 pid
	ours_running && ours=1
	pid=$(read_pid "$MINIO_PIDFILE")
	while ! minio_live; do
		if [ "$ours" = 1 ] && ! pid_matches "$pid" "$MINIO_MARK"; then
			log_tail "$MINIO_LOG"
			die "our server (pid $pid) died"
		fi
		if [ "$ours" = 0 ] && [ "$SECONDS" -ge "$idle_deadline" ] && ! port_open "$MINIO_HOST" "$MINIO_PORT"; then
			die "nothing listens on $MINIO_HOST:$MINIO_PORT and we started no server; run: $0 start"
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			log_tail "$MINIO_LOG"
			die "MinIO not live on $MINIO_URL after ${MINIO_TIMEOUT}s"
		fi
		sleep 1
	done
	minio_ensure_bucket
	log "MinIO live on $MINIO_URL, bucket $MINIO_BUCKET present"
}

cmd_stop() {
	if ours_running; then
		stop_pid "$MINIO_PIDFILE" "$MINIO_MARK" 30
	else
		log "our server is not running"
		rm -f "$MINIO_PIDFILE"
	fi
}

cmd_status() {
	if ours_running; then
		echo "minio: running (ours, pid $(read_pid "$MINIO_PIDFILE"))" >&2
	elif minio_live; then
		echo "minio: running (not ours) on $MINIO_URL" >&2
	else
		echo "minio: not running" >&2
		return 1
	fi
}

cmd_env() {
	echo "GRIDCRAWL_S3_ENDPOINT=$MINIO_HOST:$MINIO_PORT"
	echo "GRIDCRAWL_S3_ACCESS_KEY=$MINIO_USER"
	echo "GRIDCRAWL_S3_SECRET_KEY=$MINIO_PASSWORD"
	echo "GRIDCRAWL_S3_BUCKET=$MINIO_BUCKET"
}

dispatch "$@"
