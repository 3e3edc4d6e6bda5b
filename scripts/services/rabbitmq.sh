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

RMQ_PORT=5672
RMQ_DIST_PORT=25672
RMQ_MGMT_PORT=15672
RMQ_NODENAME=gridcrawl@localhost
RMQ_DIR="$SERVICES_DIR/rabbitmq"
RMQ_EPMD_MARK="$RMQ_DIR/started-epmd"
RMQ_TIMEOUT="${GRIDCRAWL_RABBITMQ_TIMEOUT:-120}"
RMQ_MANAGEMENT="${GRIDCRAWL_RABBITMQ_MANAGEMENT:-0}"
rmq_node_paths

installed() { rmq_installed; }

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

amqp_probe() { rmq_amqp_probe; }

ours_running() { rmq_running; }

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
	# Our node starts epmd when none runs; remember that so `stop` ends it too.
	epmd_note "$RMQ_EPMD_MARK"
	rmq_launch
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
			if rmq_tool rabbitmq-diagnostics -q ping >/dev/null 2>&1; then
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
	epmd_release "$RMQ_EPMD_MARK"
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
