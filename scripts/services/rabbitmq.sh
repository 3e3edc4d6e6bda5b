#!/usr/bin/env bash
# Local RabbitMQ for gridcrawl development and tests, without Docker.
#
#   scripts/services/rabbitmq.sh {install|start|check|stop|env|status}
#   scripts/services/rabbitmq.sh ctl rabbitmqctl list_queues   # any CLI tool, aimed at our node
#
# install  apt-get install Debian's rabbitmq-server (if missing), without letting the package start its
#          own system service (a temporary policy-rc.d forbids it; on systemd hosts the unit we just
#          installed is also disabled).
# start    starts our own node "gridcrawl@localhost" as the current user, every file under
#          $GRIDCRAWL_SERVICES_DIR/rabbitmq, AMQP on 127.0.0.1:5672 only. If something already answers
#          AMQP on 127.0.0.1:5672 (ours or the user's own broker), it is reused and nothing is started.
# check    waits (bounded, GRIDCRAWL_RABBITMQ_TIMEOUT, default 120 s) for an AMQP handshake on
#          127.0.0.1:5672 and, for our node, `rabbitmq-diagnostics -q ping`.
# stop     stops the node we started (SIGTERM = clean Erlang shutdown, then SIGKILL after 60 s); also
#          stops the epmd daemon if our node started it and no other node uses it. Data is kept.
# env      prints GRIDCRAWL_AMQP_URL.
#
# No plugin is needed: gridcrawl's delayed retry uses per-queue TTL + dead-letter exchanges from the core
# broker. The management UI/API (127.0.0.1:15672) is enabled only with GRIDCRAWL_RABBITMQ_MANAGEMENT=1.
set -euo pipefail

GC_NAME=rabbitmq
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RMQ_HOST=127.0.0.1
RMQ_PORT=5672
RMQ_DIST_PORT=25672
RMQ_MGMT_PORT=15672
RMQ_NODENAME=gridcrawl@localhost
RMQ_SBIN=/usr/lib/rabbitmq/bin
RMQ_DIR="$SERVICES_DIR/rabbitmq"
RMQ_PIDFILE="$RMQ_DIR/gridcrawl-rabbitmq.pid"
RMQ_EPMD_MARK="$RMQ_DIR/started-epmd"
RMQ_STARTUP_LOG="$RMQ_DIR/log/startup.log"
RMQ_NODE_LOG="$RMQ_DIR/log/$RMQ_NODENAME.log"
RMQ_TIMEOUT="${GRIDCRAWL_RABBITMQ_TIMEOUT:-120}"
RMQ_MANAGEMENT="${GRIDCRAWL_RABBITMQ_MANAGEMENT:-0}"
# Marker placed on the Erlang VM's command line so that pid files are matched to our node only.
RMQ_MARK="-gridcrawl_services_dir $RMQ_DIR"

case "$RMQ_DIR" in *[[:space:]]*) die "GRIDCRAWL_SERVICES_DIR must not contain whitespace: $SERVICES_DIR" ;; esac

# rmq_env exports the RABBITMQ_* variables that point every RabbitMQ tool at our node and directory.
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

installed() { [ -x "$RMQ_SBIN/rabbitmq-server" ] && [ -x "$RMQ_SBIN/rabbitmq-diagnostics" ]; }

cmd_install() {
	if installed; then
		log "rabbitmq-server $(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo '?') already installed"
		return 0
	fi
	apt_install rabbitmq-server
	installed || die "rabbitmq-server installed but $RMQ_SBIN/rabbitmq-server is missing"
	# On a systemd host, keep the package's own node from grabbing port 5672 at the next boot.
	if [ "$(ps -p 1 -o comm= 2>/dev/null)" = systemd ]; then
		log "disabling the rabbitmq-server system service that the package just installed"
		as_root systemctl disable --now rabbitmq-server >&2 || log "warning: could not disable rabbitmq-server.service"
	fi
	log "installed rabbitmq-server $(dpkg-query -W -f='${Version}' rabbitmq-server)"
}

# amqp_probe succeeds when 127.0.0.1:5672 answers an AMQP 0-9-1 protocol header with a
# connection.start method frame (frame type 1, channel 0, class 10, method 10).
amqp_probe() {
	local hex
	# shellcheck disable=SC2016 # expanded by the inner shell
	hex=$(timeout 5 bash -c '
		exec 3<>"/dev/tcp/$1/$2" || exit 1
		printf "AMQP\x00\x00\x09\x01" >&3
		head -c 11 <&3 | od -An -tx1' _ "$RMQ_HOST" "$RMQ_PORT" 2>/dev/null | tr -d ' \n') || return 1
	[[ "$hex" =~ ^010000[0-9a-f]{8}000a000a$ ]]
}

ours_running() { running "$RMQ_PIDFILE" "$RMQ_MARK"; }

write_config() {
	mkdir -p "$RMQ_DIR/home" "$RMQ_DIR/mnesia" "$RMQ_DIR/log"
	chmod 700 "$RMQ_DIR/home"
	if [ ! -s "$RMQ_DIR/home/.erlang.cookie" ]; then
		(umask 077 && head -c 48 /dev/urandom | od -An -tx1 | tr -dc 'a-f0-9' | head -c 40 >"$RMQ_DIR/home/.erlang.cookie")
	fi
	chmod 400 "$RMQ_DIR/home/.erlang.cookie"
	# An empty env file keeps /etc/rabbitmq/rabbitmq-env.conf from overriding our variables.
	: >"$RMQ_DIR/rabbitmq-env.conf"
	{
		echo "# generated by scripts/services/rabbitmq.sh; rewritten on every start"
		echo "listeners.tcp.default = $RMQ_HOST:$RMQ_PORT"
		echo "loopback_users.guest = true"
		echo "disk_free_limit.absolute = 50MB"
		echo "log.file.level = info"
		echo "log.console = false"
		if [ "$RMQ_MANAGEMENT" = 1 ]; then
			echo "management.tcp.ip = $RMQ_HOST"
			echo "management.tcp.port = $RMQ_MGMT_PORT"
		fi
	} >"$RMQ_DIR/rabbitmq.conf"
	if [ "$RMQ_MANAGEMENT" = 1 ]; then
		(rmq_env && "$RMQ_SBIN/rabbitmq-plugins" --offline enable rabbitmq_management >&2) ||
			die "rabbitmq-plugins --offline enable rabbitmq_management failed"
	else
		echo '[].' >"$RMQ_DIR/enabled_plugins"
	fi
}

cmd_start() {
	if ours_running; then
		log "our node is already running (pid $(read_pid "$RMQ_PIDFILE"))"
		return 0
	fi
	rm -f "$RMQ_PIDFILE"
	if amqp_probe; then
		log "a broker already answers AMQP on $RMQ_HOST:$RMQ_PORT; reusing it (not started by us)"
		return 0
	fi
	if port_open "$RMQ_HOST" "$RMQ_PORT"; then
		die "port $RMQ_HOST:$RMQ_PORT is taken by something that does not speak AMQP"
	fi
	installed || die "rabbitmq-server is not installed; run: $0 install"
	write_config
	# Our node starts epmd when none runs; remember that so `stop` ends it too. (A mark left from an
	# earlier run whose node crashed means the running epmd is still the one we started.)
	port_open 127.0.0.1 4369 || touch "$RMQ_EPMD_MARK"
	echo "=== $(date -u +%FT%TZ) start ===" >>"$RMQ_STARTUP_LOG"
	log "starting node $RMQ_NODENAME (data $RMQ_DIR/mnesia, log $RMQ_NODE_LOG)"
	local pid i
	(
		exec 9>&- # the lock must not outlive this script
		rmq_env
		cd "$RMQ_DIR"
		# RUNNING_UNDER_SYSTEMD makes the script exec erl directly, so $! is the Erlang VM itself.
		RUNNING_UNDER_SYSTEMD=true exec setsid "$RMQ_SBIN/rabbitmq-server" </dev/null >>"$RMQ_STARTUP_LOG" 2>&1
	) &
	pid=$!
	echo "$pid" >"$RMQ_PIDFILE"
	# Wait until the shell wrapper has exec'ed into the VM (whose command line carries our marker).
	for ((i = 0; i < 100; i++)); do
		pid_matches "$pid" "$RMQ_MARK" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if ! pid_matches "$pid" "$RMQ_MARK"; then
		# setsid forks when its caller happens to lead a process group: the VM then runs under a pid
		# of its own while $pid exits (seen once: the start "failed" and the node came up 2 s later).
		# Adopt the VM that carries our marker, if one comes up.
		local vm=""
		local p
		for ((i = 0; i < 100; i++)); do
			for p in /proc/[0-9]*; do
				if pid_matches "${p#/proc/}" "$RMQ_MARK"; then
					vm=${p#/proc/}
					break
				fi
			done
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

cmd_check() {
	local deadline=$((SECONDS + RMQ_TIMEOUT)) idle_deadline=$((SECONDS + 15)) ours=0 pid
	ours_running && ours=1
	pid=$(read_pid "$RMQ_PIDFILE")
	while :; do
		if amqp_probe; then
			if [ "$ours" = 0 ]; then
				log "AMQP answers on $RMQ_HOST:$RMQ_PORT"
				return 0
			fi
			if (rmq_env && "$RMQ_SBIN/rabbitmq-diagnostics" -q ping >/dev/null 2>&1); then
				log "node $RMQ_NODENAME is up: AMQP answers on $RMQ_HOST:$RMQ_PORT, rabbitmq-diagnostics ping ok"
				return 0
			fi
		fi
		if [ "$ours" = 1 ] && ! pid_matches "$pid" "$RMQ_MARK"; then
			log_tail "$RMQ_STARTUP_LOG" "$RMQ_NODE_LOG"
			die "our node (pid $pid) died during start-up"
		fi
		if [ "$ours" = 0 ] && [ "$SECONDS" -ge "$idle_deadline" ] && ! port_open "$RMQ_HOST" "$RMQ_PORT"; then
			die "nothing listens on $RMQ_HOST:$RMQ_PORT and we started no node; run: $0 start"
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			log_tail "$RMQ_STARTUP_LOG" "$RMQ_NODE_LOG"
			die "RabbitMQ not ready on $RMQ_HOST:$RMQ_PORT after ${RMQ_TIMEOUT}s"
		fi
		sleep 1
	done
}

cmd_stop() {
	if ! ours_running; then
		log "our node is not running"
		rm -f "$RMQ_PIDFILE"
	else
		# SIGTERM makes the Erlang VM run init:stop(), a clean shutdown that flushes message stores.
		stop_pid "$RMQ_PIDFILE" "$RMQ_MARK" 60
	fi
	if [ -e "$RMQ_EPMD_MARK" ]; then
		local epmd="" e
		if command -v epmd >/dev/null 2>&1; then
			epmd=$(command -v epmd)
		else
			for e in /usr/lib/erlang/erts-*/bin/epmd; do [ -x "$e" ] && epmd=$e; done
		fi
		if [ -n "$epmd" ] && port_open 127.0.0.1 4369; then
			if "$epmd" -names 2>/dev/null | grep -q '^name '; then
				log "leaving epmd running: other Erlang nodes use it"
			else
				log "stopping the epmd daemon our node started"
				"$epmd" -kill >/dev/null 2>&1 || true
			fi
		fi
		rm -f "$RMQ_EPMD_MARK"
	fi
	return 0
}

cmd_status() {
	if ours_running; then
		echo "rabbitmq: running (ours, pid $(read_pid "$RMQ_PIDFILE"))" >&2
	elif amqp_probe; then
		echo "rabbitmq: running (not ours) on $RMQ_HOST:$RMQ_PORT" >&2
	else
		echo "rabbitmq: not running" >&2
		return 1
	fi
}

cmd_env() {
	echo "GRIDCRAWL_AMQP_URL=amqp://guest:guest@$RMQ_HOST:$RMQ_PORT/"
}

# ctl TOOL ARGS... runs rabbitmqctl, rabbitmq-diagnostics, rabbitmq-plugins or rabbitmq-queues against our
# node (Debian's /usr/sbin wrappers target the package's own node and cookie instead).
cmd_ctl() {
	local tool="${1:-}"
	case "$tool" in
	rabbitmqctl | rabbitmq-diagnostics | rabbitmq-plugins | rabbitmq-queues) shift ;;
	*) die "usage: $0 ctl {rabbitmqctl|rabbitmq-diagnostics|rabbitmq-plugins|rabbitmq-queues} ARGS..." ;;
	esac
	installed || die "rabbitmq-server is not installed; run: $0 install"
	rmq_env
	exec "$RMQ_SBIN/$tool" "$@"
}

if [ "${1:-}" = ctl ]; then
	shift
	cmd_ctl "$@"
fi
dispatch "$@"
