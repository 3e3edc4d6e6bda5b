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
