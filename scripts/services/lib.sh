# shellcheck shell=bash
# Shared helpers for the local-backend scripts in scripts/services/. Sourced, never executed.
#
# Every script keeps all of its state (downloads, binaries, data, logs, pid files) under one directory:
#   ${GRIDCRAWL_SERVICES_DIR:-$HOME/.cache/gridcrawl-services}
# Human-readable progress goes to stderr; only `env` output goes to stdout, so that
#   eval "$(scripts/services/up.sh)"
# works.

# shellcheck disable=SC2034 # used by the scripts that source this file
SERVICES_DIR="${GRIDCRAWL_SERVICES_DIR:-$HOME/.cache/gridcrawl-services}"
export DEBIAN_FRONTEND=noninteractive

# GC_NAME is set by each script before sourcing; it prefixes log lines.
: "${GC_NAME:=services}"

log() { printf '[%s %s] %s\n' "$(date +%H:%M:%S)" "$GC_NAME" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

need_cmd() {
	command -v "$1" >/dev/null 2>&1 || die "required command '$1' not found${2:+ ($2)}"
}

# ensure_cmd CMD PACKAGE makes sure CMD exists, installing Debian's PACKAGE when it does not.
ensure_cmd() {
	command -v "$1" >/dev/null 2>&1 && return 0
	log "'$1' is missing; installing Debian package $2"
	apt_install "$2"
	command -v "$1" >/dev/null 2>&1 || die "installed $2 but '$1' is still missing"
}

# as_root CMD... runs CMD as root (directly if we are root, through sudo -n otherwise).
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n "$@"
	else
		die "need root to run: $*"
	fi
}

apt_updated=""
# apt_install PKG... installs Debian packages non-interactively, without letting their init scripts
# start system services (a temporary policy-rc.d answers 101 "action forbidden" when none exists).
apt_install() {
	need_cmd apt-get
	local policy=/usr/sbin/policy-rc.d created=""
	if [ ! -e "$policy" ]; then
		as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 0755 $policy"
		created=1
	fi
	local rc=0
	if [ -z "$apt_updated" ]; then
		log "apt-get update"
		as_root apt-get update -q >&2 || rc=$?
		apt_updated=1
	fi
	if [ "$rc" -eq 0 ]; then
		log "apt-get install $*"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@" >&2 || rc=$?
	fi
	if [ -n "$created" ]; then
		as_root rm -f "$policy"
	fi
	[ "$rc" -eq 0 ] || die "apt-get install $* failed (exit $rc)"
}

# read_pid PIDFILE prints the pid recorded in PIDFILE (nothing if absent or malformed).
read_pid() {
	local f="$1" pid
	[ -s "$f" ] || return 0
	pid=$(tr -dc '0-9' <"$f")
	[ -n "$pid" ] && printf '%s\n' "$pid"
	return 0
}

# pid_matches PID PATTERN succeeds when PID is alive and its command line contains PATTERN
# (guards against pid reuse after a reboot or crash).
pid_matches() {
	local pid="$1" pattern="$2"
	[ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
	# zombies are not running
	[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != "Z" ] || return 1
	{ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -qF -- "$pattern"
}

# running PIDFILE PATTERN succeeds when the process recorded in PIDFILE is alive and ours.
running() {
	local pid
	pid=$(read_pid "$1")
	pid_matches "$pid" "$2"
}

# stop_pid PIDFILE PATTERN TIMEOUT_SECONDS [SIGNAL]: signal the recorded process (TERM by default), wait
# for it to exit up to TIMEOUT_SECONDS, then SIGKILL it and wait again. Removes PIDFILE. A missing or
# stale pid file is not an error.
stop_pid() {
	local pidfile="$1" pattern="$2" timeout="$3" sig="${4:-TERM}" pid i
	pid=$(read_pid "$pidfile")
	if ! pid_matches "$pid" "$pattern"; then
		[ -e "$pidfile" ] && log "stale pid file $pidfile (pid ${pid:-none} is not ours); removing"
		rm -f "$pidfile"
		return 0
	fi
	log "stopping pid $pid (SIG$sig, up to ${timeout}s)"
	kill "-$sig" "$pid" 2>/dev/null || true
	for ((i = 0; i < timeout * 5; i++)); do
		pid_matches "$pid" "$pattern" || break
		sleep 0.2
	done
	if pid_matches "$pid" "$pattern"; then
		log "pid $pid still alive after ${timeout}s; sending SIGKILL"
		kill -9 "$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			pid_matches "$pid" "$pattern" || break
			sleep 0.2
		done
		pid_matches "$pid" "$pattern" && die "pid $pid survived SIGKILL"
	fi
	rm -f "$pidfile"
	log "stopped pid $pid"
}

# wait_pid_gone PID PATTERN TIMEOUT: wait for a process to exit without signalling it.
wait_pid_gone() {
	local pid="$1" pattern="$2" timeout="$3" i
	for ((i = 0; i < timeout * 5; i++)); do
		pid_matches "$pid" "$pattern" || return 0
		sleep 0.2
	done
	return 1
}

# port_open HOST PORT succeeds when something accepts TCP connections on HOST:PORT.
port_open() {
	# shellcheck disable=SC2016 # expanded by the inner shell
	timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null
}

# log_tail FILE... prints the last lines of each existing FILE to stderr.
log_tail() {
	local f
	for f in "$@"; do
		[ -s "$f" ] || continue
		printf -- '----- last 40 lines of %s -----\n' "$f" >&2
		tail -n 40 "$f" >&2
		printf -- '----- end of %s -----\n' "$f" >&2
	done
}

# take_lock serializes install, start and stop of one backend across concurrent callers (two test
# binaries, or up.sh and a test restarting the broker) with flock on file descriptor 9. Daemons must be
# started with 9>&- so that they do not inherit the lock.
take_lock() {
	need_cmd flock
	mkdir -p "$SERVICES_DIR/locks"
	exec 9>"$SERVICES_DIR/locks/$GC_NAME.lock"
	if ! flock -n 9; then
		log "waiting for another $GC_NAME install/start/stop to finish"
		flock -w 1800 9 || die "timed out waiting for $SERVICES_DIR/locks/$GC_NAME.lock"
	fi
}

# dispatch "$@": common entry point; each script defines cmd_install, cmd_start, cmd_check, cmd_stop,
# cmd_env and cmd_status.
dispatch() {
	local cmd="${1:-}"
	case "$cmd" in
	install | start | stop)
		shift
		take_lock
		"cmd_$cmd" "$@"
		;;
	check | env | status)
		shift
		"cmd_$cmd" "$@"
		;;
	*)
		echo "usage: $0 {install|start|check|stop|env|status}" >&2
		exit 2
		;;
	esac
}

# wait_exec PID MARK waits (up to 10 s) until PID has exec'ed into the program whose command line
# carries MARK; before that its command line is the calling script's, so "does not match yet" is not
# "exited". Fails when PID exits first or never matches.
wait_exec() {
	local pid="$1" mark="$2" i
	for ((i = 0; i < 100; i++)); do
		pid_matches "$pid" "$mark" && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.1
	done
	pid_matches "$pid" "$mark"
}

# find_marked MARK prints the pid of a live process whose command line carries MARK (nothing if none).
find_marked() {
	local p
	for p in /proc/[0-9]*; do
		if pid_matches "${p#/proc/}" "$1"; then
			echo "${p#/proc/}"
			return 0
		fi
	done
	return 0
}

# ---------------------------------------------------------------------------------------------------
# RabbitMQ nodes (scripts/services/rabbitmq.sh: one node; scripts/cluster/cluster.sh: three).
# A node is described by globals its script sets before calling these functions:
#   RMQ_DIR (all of the node's files), RMQ_NODENAME, RMQ_PORT (AMQP), RMQ_DIST_PORT (Erlang
#   distribution), RMQ_MANAGEMENT (1 enables the management plugin on RMQ_MGMT_PORT),
#   RMQ_EXTRA_CONF (more rabbitmq.conf lines), RMQ_COOKIE (Erlang cookie; random per node when empty).
# rmq_node_paths derives RMQ_PIDFILE, RMQ_STARTUP_LOG, RMQ_NODE_LOG and RMQ_MARK from them.
RMQ_SBIN=/usr/lib/rabbitmq/bin
RMQ_HOST=127.0.0.1

rmq_installed() { [ -x "$RMQ_SBIN/rabbitmq-server" ] && [ -x "$RMQ_SBIN/rabbitmq-diagnostics" ]; }

rmq_node_paths() {
	case "$RMQ_DIR" in *[[:space:]]*) die "GRIDCRAWL_SERVICES_DIR must not contain whitespace: $SERVICES_DIR" ;; esac
	RMQ_PIDFILE="$RMQ_DIR/gridcrawl-rabbitmq.pid"
	RMQ_STARTUP_LOG="$RMQ_DIR/log/startup.log"
	RMQ_NODE_LOG="$RMQ_DIR/log/$RMQ_NODENAME.log"
	# Marker placed on the Erlang VM's command line so that pid files are matched to this node only.
	RMQ_MARK="-gridcrawl_services_dir $RMQ_DIR"
}

# rmq_env exports the RABBITMQ_* variables that point every RabbitMQ tool at the node and its directory.
rmq_env() {
	export HOME="$RMQ_DIR/home" # the Erlang cookie lives in $HOME/.erlang.cookie
	export RABBITMQ_CONF_ENV_FILE="$RMQ_DIR/rabbitmq-env.conf"
	export RABBITMQ_CONFIG_FILE="$RMQ_DIR/rabbitmq.conf"
	export RABBITMQ_ADVANCED_CONFIG_FILE="$RMQ_DIR/advanced.config"
	export RABBITMQ_ENABLED_PLUGINS_FILE="$RMQ_DIR/enabled_plugins"
	export RABBITMQ_MNESIA_BASE="$RMQ_DIR/mnesia"
	export RABBITMQ_LOG_BASE="$RMQ_DIR/log"
	export RABBITMQ_PID_FILE="$RMQ_DIR/node.pid"
	export RABBITMQ_NODENAME="$RMQ_NODENAME"
	export RABBITMQ_NODE_IP_ADDRESS="$RMQ_HOST"
	export RABBITMQ_NODE_PORT="$RMQ_PORT"
	export RABBITMQ_DIST_PORT="$RMQ_DIST_PORT"
	export ERL_EPMD_ADDRESS=127.0.0.1
	export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} $RMQ_MARK"
	unset RABBITMQ_ENABLED_PLUGINS RABBITMQ_LOGS RABBITMQ_BASE
}

# rmq_tool TOOL ARGS... runs rabbitmqctl, rabbitmq-diagnostics, rabbitmq-queues... against the node.
rmq_tool() {
	local tool="$1"
	shift
	(rmq_env && "$RMQ_SBIN/$tool" "$@")
}

# rmq_amqp_probe succeeds when RMQ_HOST:RMQ_PORT answers an AMQP 0-9-1 protocol header with a
# connection.start method frame (frame type 1, channel 0, class 10, method 10).
rmq_amqp_probe() {
	local hex
	# shellcheck disable=SC2016 # expanded by the inner shell
	hex=$(timeout 5 bash -c '
		exec 3<>"/dev/tcp/$1/$2" || exit 1
		printf "AMQP\x00\x00\x09\x01" >&3
		head -c 11 <&3 | od -An -tx1' _ "$RMQ_HOST" "$RMQ_PORT" 2>/dev/null | tr -d ' \n') || return 1
	[[ "$hex" =~ ^010000[0-9a-f]{8}000a000a$ ]]
}

rmq_running() { running "$RMQ_PIDFILE" "$RMQ_MARK"; }

rmq_write_config() {
	mkdir -p "$RMQ_DIR/home" "$RMQ_DIR/mnesia" "$RMQ_DIR/log"
	chmod 700 "$RMQ_DIR/home"
	local cookie="$RMQ_DIR/home/.erlang.cookie"
	if [ -n "${RMQ_COOKIE:-}" ] && [ "$(cat "$cookie" 2>/dev/null)" != "$RMQ_COOKIE" ]; then
		rm -f "$cookie"
		(umask 077 && printf '%s' "$RMQ_COOKIE" >"$cookie")
	fi
	if [ ! -s "$cookie" ]; then
		(umask 077 && random_cookie >"$cookie")
	fi
	chmod 400 "$cookie"
	# An empty env file keeps /etc/rabbitmq/rabbitmq-env.conf from overriding our variables.
	: >"$RMQ_DIR/rabbitmq-env.conf"
	{
		echo "# generated by scripts/services/lib.sh for $RMQ_NODENAME; rewritten on every start"
		echo "listeners.tcp.default = $RMQ_HOST:$RMQ_PORT"
		echo "loopback_users.guest = true"
		echo "disk_free_limit.absolute = 50MB"
		echo "log.file.level = info"
		echo "log.console = false"
		if [ "${RMQ_MANAGEMENT:-0}" = 1 ]; then
			echo "management.tcp.ip = $RMQ_HOST"
			echo "management.tcp.port = $RMQ_MGMT_PORT"
		fi
		if [ -n "${RMQ_EXTRA_CONF:-}" ]; then printf '%s\n' "$RMQ_EXTRA_CONF"; fi
	} >"$RMQ_DIR/rabbitmq.conf"
	if [ "${RMQ_MANAGEMENT:-0}" = 1 ]; then
		rmq_tool rabbitmq-plugins --offline enable rabbitmq_management >&2 ||
			die "rabbitmq-plugins --offline enable rabbitmq_management failed"
	else
		echo '[].' >"$RMQ_DIR/enabled_plugins"
	fi
}

# random_cookie prints 40 random hex characters (an Erlang cookie).
random_cookie() { head -c 48 /dev/urandom | od -An -tx1 | tr -dc 'a-f0-9' | head -c 40; }

# rmq_launch writes the node's configuration and starts its Erlang VM in the background (no waiting
# for the broker to boot), recording the VM's pid in RMQ_PIDFILE.
rmq_launch() {
	rmq_installed || die "rabbitmq-server is not installed; run: scripts/services/rabbitmq.sh install"
	rmq_write_config
	echo "=== $(date -u +%FT%TZ) start ===" >>"$RMQ_STARTUP_LOG"
	log "starting node $RMQ_NODENAME (AMQP $RMQ_HOST:$RMQ_PORT, data $RMQ_DIR/mnesia, log $RMQ_NODE_LOG)"
	local pid vm="" i
	(
		exec 9>&- # the lock must not outlive this script
		rmq_env
		cd "$RMQ_DIR" || exit 1
		# RUNNING_UNDER_SYSTEMD makes the script exec erl directly, so $! is the Erlang VM itself.
		RUNNING_UNDER_SYSTEMD=true exec setsid "$RMQ_SBIN/rabbitmq-server" </dev/null >>"$RMQ_STARTUP_LOG" 2>&1
	) &
	pid=$!
	echo "$pid" >"$RMQ_PIDFILE"
	if ! wait_exec "$pid" "$RMQ_MARK"; then
		# setsid forks when its caller happens to lead a process group: the VM then runs under a pid
		# of its own while $pid exits (seen once: the start "failed" and the node came up 2 s later).
		# Adopt the VM that carries our marker, if one comes up.
		for ((i = 0; i < 100; i++)); do
			vm=$(find_marked "$RMQ_MARK")
			[ -n "$vm" ] && break
			sleep 0.1
		done
		if [ -z "$vm" ]; then
			log_tail "$RMQ_STARTUP_LOG" "$RMQ_NODE_LOG"
			die "rabbitmq-server (pid $pid) exited right after start"
		fi
		pid=$vm
		echo "$pid" >"$RMQ_PIDFILE"
	fi
	log "started pid $pid"
}

# epmd_path prints the epmd binary (nothing if none is installed).
epmd_path() {
	local e epmd=""
	if command -v epmd >/dev/null 2>&1; then
		command -v epmd
		return 0
	fi
	for e in /usr/lib/erlang/erts-*/bin/epmd; do [ -x "$e" ] && epmd=$e; done
	[ -z "$epmd" ] || echo "$epmd"
}

# epmd_note MARKFILE remembers (in MARKFILE) that the node about to start will start epmd, because none
# runs. (A mark left from an earlier run whose node crashed means the running epmd is still ours.)
epmd_note() { port_open 127.0.0.1 4369 || { mkdir -p "$(dirname "$1")" && touch "$1"; }; }

# epmd_release MARKFILE stops the epmd daemon noted in MARKFILE unless other Erlang nodes still use it.
epmd_release() {
	[ -e "$1" ] || return 0
	local epmd
	epmd=$(epmd_path)
	if [ -n "$epmd" ] && port_open 127.0.0.1 4369; then
		if "$epmd" -names 2>/dev/null | grep -q '^name '; then
			log "leaving epmd running: other Erlang nodes use it"
		else
			log "stopping the epmd daemon our node started"
			"$epmd" -kill >/dev/null 2>&1 || true
		fi
	fi
	rm -f "$1"
}

# ---------------------------------------------------------------------------------------------------
# Elasticsearch nodes (scripts/services/elasticsearch.sh: one node; scripts/cluster/cluster.sh: three),
# all run from the one installation ES_HOME. A node is described by globals: ES_NODE_DIR (its HOME),
# ES_CONF (its config directory), ES_TMP, ES_RUN, ES_PIDFILE, ES_STARTUP_LOG, ES_SERVER_LOG, ES_MARK
# (a string on the server JVM's command line that only this node has), ES_MARK_OPT (a JVM option
# added to put it there, may be empty), ES_HEAP and ES_TIMEOUT.
ES_VERSION=8.19.21
ES_USER=gridcrawl-es
ES_HOME="$SERVICES_DIR/elasticsearch/elasticsearch-$ES_VERSION"

es_installed() { [ -x "$ES_HOME/bin/elasticsearch" ] && [ -f "$ES_HOME/.gridcrawl-installed" ]; }

# es_run_user is the account Elasticsearch runs as: gridcrawl-es when we are root, the caller otherwise.
es_run_user() {
	if [ "$(id -u)" -eq 0 ]; then echo "$ES_USER"; else id -un; fi
}

# as_es CMD... runs CMD as the Elasticsearch account.
as_es() {
	local -a prefix=()
	[ "$(id -u)" -ne 0 ] || prefix=(runuser -u "$ES_USER" --)
	"${prefix[@]}" "$@"
}

es_java_home() {
	if [ -n "${ES_JAVA_HOME:-}" ]; then
		echo "$ES_JAVA_HOME"
		return
	fi
	local java
	ensure_cmd java openjdk-17-jre-headless
	java=$(command -v java)
	java=$(readlink -f "$java")
	dirname "$(dirname "$java")"
}

es_check_java() {
	local jh ver major
	jh=$(es_java_home)
	[ -x "$jh/bin/java" ] || die "no java at $jh/bin/java"
	ver=$("$jh/bin/java" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
	major=${ver%%.*}
	[ "$major" = 1 ] && major=$(echo "$ver" | cut -d. -f2)
	[[ "$major" =~ ^[0-9]+$ ]] && [ "$major" -ge 17 ] ||
		die "Elasticsearch $ES_VERSION needs Java 17 or newer; $jh/bin/java is '$ver'"
}

es_running() { running "$ES_PIDFILE" "$ES_MARK"; }

# es_write_config DISCOVERY writes the node's elasticsearch.yml and JVM options into ES_CONF, from the
# globals ES_CLUSTER, ES_NODE_NAME, ES_DATA, ES_LOGS, ES_HTTP_PORT and ES_TRANSPORT_PORT; DISCOVERY
# holds the discovery lines (single node, or seed hosts and initial masters).
es_write_config() {
	# Only settings this distribution knows: unknown settings (e.g. of absent modules) abort start-up.
	as_es tee "$ES_CONF/elasticsearch.yml" >/dev/null <<EOF
# generated by scripts/services/lib.sh for ${0##*/}; rewritten on every start
cluster.name: $ES_CLUSTER
node.name: $ES_NODE_NAME
path.data: $ES_DATA
path.logs: $ES_LOGS
network.host: 127.0.0.1
http.port: $ES_HTTP_PORT
transport.port: $ES_TRANSPORT_PORT
$1
xpack.security.enabled: false
cluster.routing.allocation.disk.threshold_enabled: false
# tests clean up with wildcard index deletes
action.destructive_requires_name: false
EOF
	as_es tee "$ES_CONF/jvm.options.d/gridcrawl.options" >/dev/null <<EOF
-XX:HeapDumpPath=$ES_LOGS
-XX:ErrorFile=$ES_LOGS/hs_err_pid%p.log
EOF
}

# es_launch starts the node daemonized (bin/elasticsearch -d -p) and returns once the launcher reports
# the node started; it is bounded by ES_TIMEOUT. The caller has written the node's configuration.
es_launch() {
	es_installed || die "Elasticsearch is not installed; run: scripts/services/elasticsearch.sh install"
	es_check_java
	rm -f "$ES_PIDFILE"
	log "starting Elasticsearch $ES_VERSION as $(es_run_user) (heap $ES_HEAP, config $ES_CONF, log $ES_SERVER_LOG)"
	local jh rc=0 prefix=() i
	jh=$(es_java_home)
	[ "$(id -u)" -ne 0 ] || prefix=(runuser -u "$ES_USER" --)
	echo "=== $(date -u +%FT%TZ) start ===" >>"$ES_STARTUP_LOG"
	# -d daemonizes once the node has started (or fails with its error on stderr); -p writes the pid file.
	(
		exec 9>&- # the lock must not outlive this script
		cd "$ES_RUN"
		timeout --kill-after=10 "$ES_TIMEOUT" "${prefix[@]}" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$ES_NODE_DIR" LANG=C.UTF-8 \
			ES_JAVA_HOME="$jh" ES_PATH_CONF="$ES_CONF" ES_TMPDIR="$ES_TMP" \
			ES_JAVA_OPTS="-Xms$ES_HEAP -Xmx$ES_HEAP $ES_MARK_OPT ${GRIDCRAWL_ES_JAVA_OPTS:-}" \
			"$ES_HOME/bin/elasticsearch" -d -p "$ES_PIDFILE"
	) </dev/null >>"$ES_STARTUP_LOG" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ]; then
		log_tail "$ES_STARTUP_LOG" "$ES_SERVER_LOG"
		if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
			es_running && stop_pid "$ES_PIDFILE" "$ES_MARK" 30
			die "Elasticsearch did not start within ${ES_TIMEOUT}s"
		fi
		die "bin/elasticsearch -d failed (exit $rc)"
	fi
	for ((i = 0; i < 50; i++)); do
		es_running && break
		sleep 0.2
	done
	if ! es_running; then
		log_tail "$ES_STARTUP_LOG" "$ES_SERVER_LOG"
		die "Elasticsearch daemonized but pid file $ES_PIDFILE does not name a live node"
	fi
	log "started pid $(read_pid "$ES_PIDFILE")"
}

# es_version URL prints the version of the Elasticsearch node answering on URL (fails if none).
# GET / is not used: the integ-test zip lacks the module serving it (GET / answers 405 there), so
# clients must not rely on the root "info"/"ping" endpoint either.
es_version() {
	local body
	body=$(curl -sf --max-time 5 "$1/_nodes/_local?filter_path=nodes.*.version" 2>/dev/null) || return 1
	[[ "$body" =~ \"version\":\"([^\"]+)\" ]] || return 1
	echo "${BASH_REMATCH[1]}"
}

# ---------------------------------------------------------------------------------------------------
# MinIO servers (scripts/services/minio.sh: one; scripts/cluster/cluster.sh: four), all run from the
# binary MINIO_BIN with the same credentials. A server is described by globals: MINIO_DIR (its working
# directory), MINIO_URL, MINIO_ARGS (array), MINIO_MARK, MINIO_PIDFILE, MINIO_LOG and MINIO_ENV (array
# of extra NAME=VALUE settings).
MINIO_BIN="$SERVICES_DIR/bin/minio"
MINIO_USER=gridcrawl
MINIO_PASSWORD=gridcrawl-secret
MINIO_BUCKET=gridcrawl
MINIO_REGION=us-east-1

minio_live() { curl -sf --max-time 5 -o /dev/null "$MINIO_URL/minio/health/live" 2>/dev/null; }

minio_running() { running "$MINIO_PIDFILE" "$MINIO_MARK"; }

# minio_launch starts the server in the background and returns once it runs (not once it answers).
minio_launch() {
	local pid i
	echo "=== $(date -u +%FT%TZ) start ===" >>"$MINIO_LOG"
	(
		exec 9>&- # the lock must not outlive this script
		cd "$MINIO_DIR" || exit 1
		exec env MINIO_ROOT_USER="$MINIO_USER" MINIO_ROOT_PASSWORD="$MINIO_PASSWORD" \
			MINIO_REGION="$MINIO_REGION" MINIO_UPDATE=off MINIO_BROWSER=on "${MINIO_ENV[@]}" \
			setsid "$MINIO_BIN" "${MINIO_ARGS[@]}" </dev/null >>"$MINIO_LOG" 2>&1
	) &
	pid=$!
	echo "$pid" >"$MINIO_PIDFILE"
	wait_exec "$pid" "$MINIO_MARK" || true
	# Then give a server that fails on start (bad data directory, port race) a moment to exit.
	for ((i = 0; i < 10; i++)); do
		pid_matches "$pid" "$MINIO_MARK" || break
		sleep 0.1
	done
	if ! pid_matches "$pid" "$MINIO_MARK"; then
		log_tail "$MINIO_LOG"
		die "minio (pid $pid) exited right after start"
	fi
	log "started pid $pid"
}

# s3 METHOD PATH prints the HTTP status of a SigV4-signed S3 request (empty body) to MINIO_URL.
s3() {
	curl -s --max-time 10 -o /dev/null -w '%{http_code}' -X "$1" \
		--aws-sigv4 "aws:amz:$MINIO_REGION:s3" --user "$MINIO_USER:$MINIO_PASSWORD" \
		-H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
		"$MINIO_URL$2"
}

minio_ensure_bucket() {
	local code
	code=$(s3 HEAD "/$MINIO_BUCKET") || true
	case "$code" in
	200) return 0 ;;
	404)
		code=$(s3 PUT "/$MINIO_BUCKET") || true
		case "$code" in
		200 | 409) log "created bucket $MINIO_BUCKET" ;;
		*) die "creating bucket $MINIO_BUCKET failed: HTTP $code" ;;
		esac
		;;
	403) die "MinIO on $MINIO_URL rejects our credentials ($MINIO_USER): it is not ours or was set up differently" ;;
	*) die "HEAD bucket $MINIO_BUCKET: HTTP ${code:-none}" ;;
	esac
}
