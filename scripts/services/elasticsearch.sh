#!/usr/bin/env bash
# Local Elasticsearch 8 for gridcrawl development and tests, without Docker.
#
#   scripts/services/elasticsearch.sh {install|start|check|stop|env|status}
#
# install  downloads Maven Central's org.elasticsearch.distribution.integ-test-zip:elasticsearch zip
#          (pinned version, sha1 and sha512 checked), unpacks it under $GRIDCRAWL_SERVICES_DIR/elasticsearch
#          and, when run as root, creates the system user gridcrawl-es that owns it (Elasticsearch refuses
#          to run as root). Needs Java 17+ (`java` on PATH, or ES_JAVA_HOME).
# start    single node, security off, HTTP on 127.0.0.1:9200 only, 512 MB heap (GRIDCRAWL_ES_HEAP), disk
#          watermarks off, daemonized with a pid file. A node already answering on 127.0.0.1:9200 (ours or
#          the user's) is reused and nothing is started.
# check    waits (bounded, GRIDCRAWL_ES_TIMEOUT, default 180 s) for
#          GET /_cluster/health?wait_for_status=yellow.
# stop     SIGTERM, wait up to 60 s, then SIGKILL. Data is kept.
# env      prints GRIDCRAWL_ES_URL.
#
# The integ-test zip is the bare server: its only modules are transport-netty4, x-pack-core,
# x-pack-security and apm. It has NO lang-painless (no scripts, no scripted updates), NO reindex (no
# _reindex, _update_by_query, _delete_by_query), NO analysis-common (only the built-in standard, simple,
# whitespace, stop, keyword and pattern analyzers; no language analyzers), NO mapper-extras (no
# scaled_float, rank_feature, search_as_you_type), no ingest-common, no data streams/ILM. gridcrawl code
# must not depend on any of those.
set -euo pipefail

GC_NAME=elasticsearch
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Newest 8.x in https://repo1.maven.org/maven2/org/elasticsearch/distribution/integ-test-zip/elasticsearch/
# maven-metadata.xml at the time of writing; checksums are Maven Central's .sha1/.sha512 for the zip.
# (ES_VERSION, ES_HOME and ES_USER are set in lib.sh, shared with scripts/cluster/cluster.sh.)
ES_SHA1=8861771bbfe2fab12ccc386bc8b4c5c6f9619865
ES_SHA512=cf6b0a93860d329937ae7f913ec5073b0c726c77639764b93fc83a304aa1dd9d4defcfa2849948eea3b0b47c2065f994908603939fc2a4774c9c4d868c5ec1dd
ES_URL="https://repo1.maven.org/maven2/org/elasticsearch/distribution/integ-test-zip/elasticsearch/$ES_VERSION/elasticsearch-$ES_VERSION.zip"

ES_HOST=127.0.0.1
ES_PORT=9200
ES_TRANSPORT_PORT=9300
ES_BASE_URL="http://$ES_HOST:$ES_PORT"
ES_DIR="$SERVICES_DIR/elasticsearch"
ES_NODE_DIR="$ES_DIR"
ES_CONF="$ES_HOME/config"
ES_DATA="$ES_DIR/data"
ES_LOGS="$ES_DIR/logs"
ES_TMP="$ES_DIR/tmp"
ES_RUN="$ES_DIR/run"
ES_PIDFILE="$ES_RUN/elasticsearch.pid"
ES_STARTUP_LOG="$ES_DIR/startup.log"
ES_CLUSTER=gridcrawl-dev
ES_SERVER_LOG="$ES_LOGS/$ES_CLUSTER.log"
ES_ZIP="$SERVICES_DIR/downloads/elasticsearch-$ES_VERSION.zip"
ES_TIMEOUT="${GRIDCRAWL_ES_TIMEOUT:-180}"
ES_HEAP="${GRIDCRAWL_ES_HEAP:-512m}"
# The server JVM's command line carries -Des.path.home=<home>; matching it ties the pid file to our node.
ES_MARK="-Des.path.home=$ES_HOME"
ES_MARK_OPT=""

case "$ES_DIR" in *[[:space:]]*) die "GRIDCRAWL_SERVICES_DIR must not contain whitespace: $SERVICES_DIR" ;; esac

installed() { es_installed; }

ensure_user() {
	[ "$(id -u)" -eq 0 ] || return 0
	if ! id "$ES_USER" >/dev/null 2>&1; then
		log "creating system user $ES_USER"
		useradd --system --user-group --no-create-home --home-dir "$ES_DIR" \
			--shell /usr/sbin/nologin --comment "gridcrawl local Elasticsearch" "$ES_USER" ||
			die "useradd $ES_USER failed"
	fi
}

# ensure_traversable lets the Elasticsearch account reach $ES_DIR through parent directories such as a
# 0700 /root, by granting that one account search (x) permission with an ACL.
ensure_traversable() {
	[ "$(id -u)" -eq 0 ] || return 0
	local d="$ES_DIR" dirs=()
	while [ "$d" != / ] && [ -n "$d" ]; do
		d=$(dirname "$d")
		dirs=("$d" "${dirs[@]}") # outermost first: a parent must be traversable to test its child
	done
	for d in "${dirs[@]}"; do
		runuser -u "$ES_USER" -- test -x "$d" && continue
		command -v setfacl >/dev/null 2>&1 || apt_install acl
		log "granting $ES_USER search permission on $d (setfacl -m u:$ES_USER:x)"
		setfacl -m "u:$ES_USER:x" "$d" || die "setfacl on $d failed; choose a GRIDCRAWL_SERVICES_DIR that $ES_USER can reach"
		runuser -u "$ES_USER" -- test -x "$d" || die "$ES_USER still cannot traverse $d"
	done
}

verify_zip() {
	local f="$1"
	echo "$ES_SHA1  $f" | sha1sum -c --quiet - >&2 || return 1
	echo "$ES_SHA512  $f" | sha512sum -c --quiet - >&2 || return 1
}

cmd_install() {
	es_check_java
	ensure_user
	if ! installed; then
		ensure_cmd curl curl
		ensure_cmd unzip unzip
		mkdir -p "$SERVICES_DIR/downloads"
		if [ ! -f "$ES_ZIP" ] || ! verify_zip "$ES_ZIP" 2>/dev/null; then
			log "downloading $ES_URL"
			curl -fsSL --retry 3 --retry-delay 2 -o "$ES_ZIP.part" "$ES_URL" || die "download of $ES_URL failed"
			verify_zip "$ES_ZIP.part" || die "checksum mismatch for $ES_URL (expected sha1 $ES_SHA1)"
			mv "$ES_ZIP.part" "$ES_ZIP"
		fi
		log "unpacking Elasticsearch $ES_VERSION into $ES_HOME"
		rm -rf "$ES_HOME" "$ES_DIR/unpack.tmp"
		mkdir -p "$ES_DIR/unpack.tmp"
		unzip -q "$ES_ZIP" -d "$ES_DIR/unpack.tmp"
		mv "$ES_DIR/unpack.tmp/elasticsearch-$ES_VERSION" "$ES_HOME"
		rmdir "$ES_DIR/unpack.tmp"
		touch "$ES_HOME/.gridcrawl-installed"
	fi
	mkdir -p "$ES_DATA" "$ES_LOGS" "$ES_TMP" "$ES_RUN"
	if [ "$(id -u)" -eq 0 ]; then
		chown -R "$ES_USER:$ES_USER" "$ES_HOME" "$ES_DATA" "$ES_LOGS" "$ES_TMP" "$ES_RUN"
		chown "$ES_USER:$ES_USER" "$ES_DIR"
		ensure_traversable
	fi
	log "Elasticsearch $ES_VERSION installed in $ES_HOME (runs as $(es_run_user))"
}

write_config() {
	# Only settings this distribution knows: unknown settings (e.g. of absent modules) abort start-up.
	as_es tee "$ES_HOME/config/elasticsearch.yml" >/dev/null <<EOF
# generated by scripts/services/elasticsearch.sh; rewritten on every start
cluster.name: $ES_CLUSTER
node.name: gridcrawl-es-1
path.data: $ES_DATA
path.logs: $ES_LOGS
network.host: $ES_HOST
http.port: $ES_PORT
transport.port: $ES_TRANSPORT_PORT
discovery.type: single-node
xpack.security.enabled: false
cluster.routing.allocation.disk.threshold_enabled: false
# tests clean up with wildcard index deletes
action.destructive_requires_name: false
EOF
	as_es tee "$ES_HOME/config/jvm.options.d/gridcrawl.options" >/dev/null <<EOF
-XX:HeapDumpPath=$ES_LOGS
-XX:ErrorFile=$ES_LOGS/hs_err_pid%p.log
EOF
}

es_answers() { es_version "$ES_BASE_URL" >/dev/null; }

ours_running() { es_running; }

cmd_start() {
	if ours_running; then
		log "our node is already running (pid $(read_pid "$ES_PIDFILE"))"
		return 0
	fi
	if es_answers; then
		local v
		v=$(es_version "$ES_BASE_URL")
		case "$v" in 8.*) ;; *) die "a node on $ES_BASE_URL answers but its version is '$v', not 8.x" ;; esac
		log "Elasticsearch $v already answers on $ES_BASE_URL; reusing it (not started by us)"
		return 0
	fi
	if port_open "$ES_HOST" "$ES_PORT"; then
		die "port $ES_HOST:$ES_PORT is taken by something that is not Elasticsearch"
	fi
	installed || die "Elasticsearch is not installed; run: $0 install"
	es_check_java
	write_config
	es_launch
}

cmd_check() {
	local deadline=$((SECONDS + ES_TIMEOUT)) idle_deadline=$((SECONDS + 15)) ours=0 pid body
	ours_running && ours=1
	pid=$(read_pid "$ES_PIDFILE")
	while :; do
		if body=$(curl -sf --max-time 15 "$ES_BASE_URL/_cluster/health?wait_for_status=yellow&timeout=10s" 2>/dev/null) &&
			[[ "$body" =~ \"status\":\"(green|yellow)\" ]]; then
			log "cluster health ${BASH_REMATCH[1]} on $ES_BASE_URL"
			return 0
		fi
		if [ "$ours" = 1 ] && ! pid_matches "$pid" "$ES_MARK"; then
			log_tail "$ES_STARTUP_LOG" "$ES_SERVER_LOG"
			die "our node (pid $pid) died"
		fi
		if [ "$ours" = 0 ] && [ "$SECONDS" -ge "$idle_deadline" ] && ! port_open "$ES_HOST" "$ES_PORT"; then
			die "nothing listens on $ES_HOST:$ES_PORT and we started no node; run: $0 start"
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			log_tail "$ES_STARTUP_LOG" "$ES_SERVER_LOG"
			die "Elasticsearch not yellow on $ES_BASE_URL after ${ES_TIMEOUT}s"
		fi
		sleep 1
	done
}

cmd_stop() {
	if ours_running; then
		stop_pid "$ES_PIDFILE" "$ES_MARK" 60
	else
		log "our node is not running"
		rm -f "$ES_PIDFILE"
	fi
}

cmd_status() {
	if ours_running; then
		echo "elasticsearch: running (ours, pid $(read_pid "$ES_PIDFILE"))" >&2
	elif es_answers; then
		echo "elasticsearch: running (not ours) on $ES_BASE_URL" >&2
	else
		echo "elasticsearch: not running" >&2
		return 1
	fi
}

cmd_env() {
	echo "GRIDCRAWL_ES_URL=$ES_BASE_URL"
}

dispatch "$@"
