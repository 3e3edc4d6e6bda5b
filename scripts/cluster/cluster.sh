#!/usr/bin/env bash
# Local clusters for gridcrawl, without Docker: a three-node RabbitMQ cluster, a three-node
# Elasticsearch cluster and a four-node distributed (erasure-coded) MinIO, all on 127.0.0.1, run from
# the packages and binaries scripts/services/*.sh install. docs/clusters.md describes them.
#
#   scripts/cluster/cluster.sh up            install if missing, start every node not running, form the
#                                            clusters, wait until healthy, print the env lines
#   scripts/cluster/cluster.sh down          stop every node (data kept)
#   scripts/cluster/cluster.sh env           print the env lines (export GRIDCRAWL_...=...)
#   scripts/cluster/cluster.sh status        nodes and cluster health; non-zero unless all are up
#   scripts/cluster/cluster.sh nodes         node names, state, pid, ports, RSS
#   scripts/cluster/cluster.sh wipe          down, then delete all cluster data
#   scripts/cluster/cluster.sh kill NODE     kill -9 that node's server process, return at once
#   scripts/cluster/cluster.sh start NODE    start that node again, wait until it rejoined its cluster
#   scripts/cluster/cluster.sh leader-node rabbitmq                   node with most quorum-queue leaders
#   scripts/cluster/cluster.sh primary-node elasticsearch [PREFIX]    node with most primary shards
#
# Nodes: rabbit1..3 (AMQP 5701-5703, Erlang distribution 25701-25703, node names
# gridcrawl-rabbitN@localhost), es1..3 (HTTP 9211-9213, transport 9311-9313, node names es1..3),
# minio1..4 (S3 9301-9304, console 9401-9404). State under ${GRIDCRAWL_SERVICES_DIR}/cluster/.
# The single-node backends of scripts/services (5672, 9200, 9000) are never touched.
set -euo pipefail

GC_NAME=cluster
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
services="$(cd "$here/../services" && pwd)"
# shellcheck source=../services/lib.sh
. "$services/lib.sh"

CL_DIR="$SERVICES_DIR/cluster"
case "$CL_DIR" in *[[:space:]]*) die "GRIDCRAWL_SERVICES_DIR must not contain whitespace: $SERVICES_DIR" ;; esac
RABBIT_NODES=(rabbit1 rabbit2 rabbit3)
ES_NODES=(es1 es2 es3)
MINIO_NODES=(minio1 minio2 minio3 minio4)
ALL_NODES=("${RABBIT_NODES[@]}" "${ES_NODES[@]}" "${MINIO_NODES[@]}")
# Seconds to wait for one node (or one cluster's nodes) to start and join: a cold start of three
# Elasticsearch nodes on two busy cores takes 1-3 minutes.
CL_TIMEOUT="${GRIDCRAWL_CLUSTER_TIMEOUT:-300}"
CL_RMQ_TIMEOUT="$CL_TIMEOUT"
CL_ES_TIMEOUT="$CL_TIMEOUT"
CL_MINIO_TIMEOUT="$CL_TIMEOUT"
ES_HEAP="${GRIDCRAWL_ES_HEAP:-512m}"
ES_TIMEOUT="$CL_ES_TIMEOUT"
ES_CLUSTER=gridcrawl-cluster
# Written once the Elasticsearch cluster first formed: from then on cluster.initial_master_nodes is
# left out of the configuration (it is for bootstrapping a new cluster only).
ES_BOOTSTRAPPED="$CL_DIR/es-bootstrapped"
RMQ_COOKIE_FILE="$CL_DIR/erlang.cookie"
RMQ_EPMD_MARK="$CL_DIR/started-epmd"
MINIO_DRIVES="$CL_DIR/minio"

# ---------------------------------------------------------------------------------------------------
# Node descriptions: each sets the globals the lib.sh functions of its kind read.

# node_num NAME prints the node's number (rabbit2 -> 2); fails on an unknown name.
node_num() {
	case " ${ALL_NODES[*]} " in *" $1 "*) echo "${1##*[a-z]}" ;; *) return 1 ;; esac
}

node_kind() {
	case "$1" in rabbit*) echo rabbitmq ;; es*) echo elasticsearch ;; minio*) echo minio ;; esac
}

rabbit_node() {
	local n
	n=$(node_num "$1")
	RMQ_DIR="$CL_DIR/$1"
	RMQ_NODENAME="gridcrawl-$1@localhost"
	RMQ_PORT=$((5700 + n))
	RMQ_DIST_PORT=$((25700 + n))
	RMQ_MANAGEMENT=0
	RMQ_COOKIE=""
	[ ! -s "$RMQ_COOKIE_FILE" ] || RMQ_COOKIE=$(cat "$RMQ_COOKIE_FILE")
	# With three nodes the side of a partition that holds the minority pauses (RabbitMQ's recommendation
	# for an odd number of nodes); quorum queues need a majority anyway.
	# A new quorum queue's leader goes to the node with the fewest leaders, not to the node its declaring
	# client is connected to (client-local, the default): the services connect to the first node of their
	# list that answers, which would otherwise lead every queue.
	RMQ_EXTRA_CONF="cluster_partition_handling = pause_minority
queue_leader_locator = balanced"
	rmq_node_paths
	NODE_PID="$RMQ_PIDFILE"
	NODE_MARK="$RMQ_MARK"
	NODE_PORTS="$RMQ_PORT $RMQ_DIST_PORT"
}

es_node() {
	local n
	n=$(node_num "$1")
	ES_NODE_NAME="$1"
	ES_NODE_DIR="$CL_DIR/$1"
	ES_CONF="$ES_NODE_DIR/config"
	ES_DATA="$ES_NODE_DIR/data"
	ES_LOGS="$ES_NODE_DIR/logs"
	ES_TMP="$ES_NODE_DIR/tmp"
	ES_RUN="$ES_NODE_DIR/run"
	ES_PIDFILE="$ES_RUN/elasticsearch.pid"
	ES_STARTUP_LOG="$ES_NODE_DIR/startup.log"
	ES_SERVER_LOG="$ES_LOGS/$ES_CLUSTER.log"
	ES_HTTP_PORT=$((9210 + n))
	ES_TRANSPORT_PORT=$((9310 + n))
	ES_URL_N="http://127.0.0.1:$ES_HTTP_PORT"
	# All three nodes share ES_HOME (and so -Des.path.home): this system property tells them apart.
	ES_MARK_OPT="-Dgridcrawl.cluster.node=$ES_NODE_DIR"
	ES_MARK="$ES_MARK_OPT"
	NODE_PID="$ES_PIDFILE"
	NODE_MARK="$ES_MARK"
	NODE_PORTS="$ES_HTTP_PORT $ES_TRANSPORT_PORT"
}

minio_node() {
	local n i
	n=$(node_num "$1")
	MINIO_DIR="$MINIO_DRIVES"
	MINIO_URL="http://127.0.0.1:$((9300 + n))"
	MINIO_LOG="$MINIO_DRIVES/$1.log"
	MINIO_PIDFILE="$MINIO_DRIVES/$1.pid"
	# One drive per server; every server lists all four (the order defines the erasure set).
	MINIO_ARGS=(server --address "127.0.0.1:$((9300 + n))" --console-address "127.0.0.1:$((9400 + n))")
	for i in 1 2 3 4; do MINIO_ARGS+=("http://127.0.0.1:$((9300 + i))$MINIO_DRIVES/d$i"); done
	# "--address A --console-address C" names this server only.
	MINIO_MARK="${MINIO_ARGS[*]:0:5}"
	# In a container (/.dockerenv, as on CI) MinIO waits forever for 127.0.0.1 to resolve to a
	# non-loopback address; _MINIO_SERVER_LOCAL names the endpoint that is this server (MinIO's
	# cmd/endpoint.go, PoolEndpointList.UpdateIsLocal). Outside a container it is not consulted.
	MINIO_ENV=(MINIO_CI_CD=on "_MINIO_SERVER_LOCAL=127.0.0.1:$((9300 + n))")
	NODE_PID="$MINIO_PIDFILE"
	NODE_MARK="$MINIO_MARK"
	NODE_PORTS="$((9300 + n)) $((9400 + n))"
}

# node NAME describes NAME (sets NODE_PID, NODE_MARK, NODE_PORTS and the kind's globals).
node() {
	node_num "$1" >/dev/null || die "unknown node '$1' (known: ${ALL_NODES[*]})"
	case "$1" in
	rabbit*) rabbit_node "$1" ;;
	es*) es_node "$1" ;;
	minio*) minio_node "$1" ;;
	esac
}

node_running() {
	node "$1"
	running "$NODE_PID" "$NODE_MARK"
}

# check_ports NAME dies when one of the node's ports is taken while the node is not running.
check_ports() {
	local p
	for p in $NODE_PORTS; do
		if port_open 127.0.0.1 "$p"; then
			die "$1: port 127.0.0.1:$p is taken by a process that is not this node"
		fi
	done
}

# ---------------------------------------------------------------------------------------------------
# RabbitMQ

short_rabbit() { sed -E 's/^gridcrawl-(rabbit[0-9]+)@localhost$/\1/'; }

# rabbit_running_nodes NAME prints the running cluster members as NAME's node sees them (short names).
rabbit_running_nodes() {
	rabbit_node "$1"
	rmq_tool rabbitmqctl -q cluster_status --formatter json 2>/dev/null |
		jq -r '.running_nodes[]' 2>/dev/null | short_rabbit
}

rabbit_start() {
	rabbit_node "$1"
	if rmq_running; then
		log "$1 already running (pid $(read_pid "$RMQ_PIDFILE"))"
		return 0
	fi
	rm -f "$RMQ_PIDFILE"
	check_ports "$1"
	epmd_note "$RMQ_EPMD_MARK"
	rmq_launch
}

# rabbit_wait_app NAME waits until the node's broker application runs: AMQP answers, which the broker
# starts last in its boot (its client listeners). No CLI call: each boots an Erlang VM, which took a
# minute when the cluster test loaded the machine.
rabbit_wait_app() {
	rabbit_node "$1"
	local deadline=$((SECONDS + CL_RMQ_TIMEOUT)) pid
	pid=$(read_pid "$RMQ_PIDFILE")
	while :; do
		if rmq_amqp_probe; then
			log "$1 ($RMQ_NODENAME) runs; AMQP on $RMQ_HOST:$RMQ_PORT"
			return 0
		fi
		if ! pid_matches "$pid" "$RMQ_MARK"; then
			log_tail "$RMQ_STARTUP_LOG" "$RMQ_NODE_LOG"
			die "$1 (pid $pid) died during start-up"
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			log_tail "$RMQ_STARTUP_LOG" "$RMQ_NODE_LOG"
			die "$1 not running after ${CL_RMQ_TIMEOUT}s"
		fi
		sleep 1
	done
}

# rabbit_join NAME makes NAME a member of rabbit1's cluster unless it is one already (as NAME itself
# reports: a node that cannot say is never reset).
rabbit_join() {
	rabbit_node "$1"
	local status out
	status=$(rmq_tool rabbitmqctl -q cluster_status --formatter json 2>&1) ||
		die "$1: rabbitmqctl cluster_status failed: $status"
	if jq -r '.disk_nodes[]' <<<"$status" | short_rabbit | grep -qx rabbit1; then
		return 0
	fi
	log "$1 joins the cluster of rabbit1 (stop_app, reset, join_cluster, start_app)"
	out=$({ rmq_tool rabbitmqctl -q stop_app &&
		rmq_tool rabbitmqctl -q reset &&
		rmq_tool rabbitmqctl -q join_cluster gridcrawl-rabbit1@localhost &&
		rmq_tool rabbitmqctl -q start_app; } 2>&1) || {
		printf '%s\n' "$out" >&2
		die "$1 could not join rabbit1's cluster"
	}
}

# rabbit_wait_member NAME waits until another running node's cluster_status lists NAME as running.
rabbit_wait_member() {
	local deadline=$((SECONDS + CL_RMQ_TIMEOUT)) other
	while :; do
		for other in "${RABBIT_NODES[@]}"; do
			[ "$other" != "$1" ] || continue
			node_running "$other" || continue
			if rabbit_running_nodes "$other" | grep -qx "$1"; then
				log "$1 is a running member of the RabbitMQ cluster (seen by $other)"
				return 0
			fi
		done
		if [ "$SECONDS" -ge "$deadline" ]; then
			rabbit_node "$1"
			log_tail "$RMQ_NODE_LOG"
			die "$1 not running in the cluster after ${CL_RMQ_TIMEOUT}s"
		fi
		sleep 1
	done
}

rabbit_up() {
	rmq_installed || "$services/rabbitmq.sh" install >&2
	mkdir -p "$CL_DIR"
	if [ ! -s "$RMQ_COOKIE_FILE" ]; then
		(umask 077 && random_cookie >"$RMQ_COOKIE_FILE")
	fi
	local n
	# All at once: a node that was not the last to stop waits for its peers' tables at boot.
	for n in "${RABBIT_NODES[@]}"; do rabbit_start "$n"; done
	for n in "${RABBIT_NODES[@]}"; do rabbit_wait_app "$n"; done
	for n in "${RABBIT_NODES[@]:1}"; do rabbit_join "$n"; done
	for n in "${RABBIT_NODES[@]}"; do rabbit_wait_member "$n"; done
}

# leader_node prints the short name of the node that leads the most quorum queues (all vhosts).
leader_node() {
	local n out="" vhost
	for n in "${RABBIT_NODES[@]}"; do
		node_running "$n" || continue
		rabbit_node "$n"
		for vhost in $(rmq_tool rabbitmqctl -q list_vhosts --no-table-headers 2>/dev/null); do
			out+=$(rmq_tool rabbitmqctl -q list_queues -p "$vhost" --no-table-headers name type leader 2>/dev/null)$'\n' ||
				true
		done
		[ -z "${out//$'\n'/}" ] || break
	done
	local best
	best=$(printf '%s\n' "$out" | awk -F'\t' '$2 == "quorum" && $3 != "" {print $3}' | short_rabbit |
		sort | uniq -c | sort -k1,1nr -k2 | awk 'NR == 1 {print $2}')
	[ -n "$best" ] || die "no quorum queue leader found (no quorum queues, or no node answers)"
	echo "$best"
}

# ---------------------------------------------------------------------------------------------------
# Elasticsearch

es_prepare_node() {
	mkdir -p "$ES_NODE_DIR" "$ES_DATA" "$ES_LOGS" "$ES_TMP" "$ES_RUN"
	if [ ! -f "$ES_CONF/jvm.options" ]; then
		rm -rf "$ES_CONF"
		cp -a "$ES_HOME/config" "$ES_CONF"
	fi
	mkdir -p "$ES_CONF/jvm.options.d"
	if [ "$(id -u)" -eq 0 ]; then chown -R "$ES_USER:$ES_USER" "$ES_NODE_DIR"; fi
	local bootstrap="" n seeds=""
	for n in "${ES_NODES[@]}"; do seeds+="${seeds:+, }\"127.0.0.1:$((9310 + $(node_num "$n")))\""; done
	if [ ! -e "$ES_BOOTSTRAPPED" ]; then
		bootstrap="cluster.initial_master_nodes: [$(printf '"%s", ' "${ES_NODES[@]}" | sed 's/, $//')]"
	fi
	es_write_config "discovery.seed_hosts: [$seeds]
$bootstrap"
}

es_start() {
	es_node "$1"
	if es_running; then
		log "$1 already running (pid $(read_pid "$ES_PIDFILE"))"
		return 0
	fi
	check_ports "$1"
	es_prepare_node
	es_launch
}

# es_running_count prints how many Elasticsearch nodes run (by our pid files).
es_running_count() {
	local n c=0
	for n in "${ES_NODES[@]}"; do
		if node_running "$n"; then c=$((c + 1)); fi
	done
	echo "$c"
}

# es_view prints "STATUS NODES NAME..." of the cluster as the node at URL sees it (fails if none).
es_view() {
	local h names
	h=$(curl -sf --max-time 15 "$1/_cluster/health?wait_for_status=yellow&timeout=10s" 2>/dev/null |
		jq -r '"\(.status) \(.number_of_nodes)"' 2>/dev/null) || return 1
	names=$(curl -sf --max-time 10 "$1/_cat/nodes?h=name" 2>/dev/null | sort | tr -s ' \n' ' ') || return 1
	echo "$h $names"
}

# es_wait_joined NAME waits until NAME's node sees a yellow or green cluster that holds NAME and every
# running node (a node someone else stopped is not waited for).
es_wait_joined() {
	local want view="" pid deadline=$((SECONDS + CL_ES_TIMEOUT)) status count names
	while :; do
		want=$(es_running_count)
		es_node "$1"
		pid=$(read_pid "$ES_PIDFILE")
		if view=$(es_view "$ES_URL_N"); then
			read -r status count names <<<"$view"
			case "$status" in
			green | yellow)
				if [ "$count" = "$want" ] && [[ " $names " == *" $1 "* ]]; then
					log "$1 is in cluster $ES_CLUSTER: status $status, nodes $names"
					return 0
				fi
				;;
			esac
		fi
		if ! pid_matches "$pid" "$ES_MARK"; then
			log_tail "$ES_STARTUP_LOG" "$ES_SERVER_LOG"
			die "$1 (pid $pid) died"
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			log_tail "$ES_SERVER_LOG"
			die "$1 has not joined a healthy cluster of the $want running nodes after ${CL_ES_TIMEOUT}s (last seen: ${view:-no answer})"
		fi
		sleep 1
	done
}

es_up() {
	es_installed || "$services/elasticsearch.sh" install >&2
	local n pids=() failed=0 p
	# In parallel: each launcher returns only once its node started, which takes the other nodes.
	for n in "${ES_NODES[@]}"; do
		es_start "$n" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || failed=1; done
	[ "$failed" = 0 ] || die "an Elasticsearch node failed to start"
	for n in "${ES_NODES[@]}"; do es_wait_joined "$n"; done
	touch "$ES_BOOTSTRAPPED"
}

# any_es_url prints the URL of a running Elasticsearch node.
any_es_url() {
	local n
	for n in "${ES_NODES[@]}"; do
		if node_running "$n" && es_version "$ES_URL_N" >/dev/null; then
			echo "$ES_URL_N"
			return 0
		fi
	done
	die "no Elasticsearch node answers"
}

# primary_node [PREFIX] prints the node holding the most started primary shards (of indices whose
# name starts with PREFIX).
primary_node() {
	local url best shards
	url=$(any_es_url)
	shards=$(curl -sf --max-time 15 "$url/_cat/shards?h=index,prirep,state,node") ||
		die "GET $url/_cat/shards failed"
	best=$(printf '%s\n' "$shards" |
		awk -v pre="${1:-}" '$2 == "p" && $3 == "STARTED" && index($1, pre) == 1 {print $4}' |
		sort | uniq -c | sort -k1,1nr -k2 | awk 'NR == 1 {print $2}')
	[ -n "$best" ] || die "no started primary shard${1:+ of an index starting with $1}"
	echo "$best"
}

# ---------------------------------------------------------------------------------------------------
# MinIO

minio_start() {
	minio_node "$1"
	if minio_running; then
		log "$1 already running (pid $(read_pid "$MINIO_PIDFILE"))"
		return 0
	fi
	rm -f "$MINIO_PIDFILE"
	check_ports "$1"
	mkdir -p "$MINIO_DRIVES/d$(node_num "$1")"
	log "starting $1 on $MINIO_URL (log $MINIO_LOG)"
	minio_launch
}

# minio_all_see_all succeeds when every running server sees enough drives: with all servers running,
# each answers /minio/health/cluster?maintenance=true with 200 (it would keep write quorum without its
# own drive, so it sees every other drive online); otherwise each answers /minio/health/cluster with 200.
minio_all_see_all() {
	local n q="?maintenance=true"
	for n in "${MINIO_NODES[@]}"; do node_running "$n" || q=""; done
	for n in "${MINIO_NODES[@]}"; do
		node_running "$n" || continue
		curl -sf --max-time 5 -o /dev/null "$MINIO_URL/minio/health/cluster$q" || return 1
	done
}

# MinIO reconnects drives that were offline in a monitor loop every 15 s (defaultMonitorConnectEndpoint-
# Interval in its cmd/erasure-sets.go), on every server. The health endpoints aggregate every server's
# report of its own drives, so they answer 200 before the servers have reconnected to each other's
# drives. Seen without a settle time: a server restarted 1 s earlier answered NoSuchKey (404) for
# 10-15 s for an object written while it was down, and a PUT through another server failed with 503
# when a second server went down 3 s after the restart. So `start` waits one monitor interval more.
MINIO_SETTLE=17

# minio_wait NAME [SETTLE] waits until NAME answers /minio/health/live and every running server sees
# the drives (minio_all_see_all), then SETTLE seconds (default 0) more, re-checking.
minio_wait() {
	minio_node "$1"
	local deadline=$((SECONDS + CL_MINIO_TIMEOUT + ${2:-0})) pid url="$MINIO_URL" log="$MINIO_LOG" mark="$MINIO_MARK" settled=""
	pid=$(read_pid "$MINIO_PIDFILE")
	while :; do
		if MINIO_URL=$url minio_live && minio_all_see_all; then
			[ -n "$settled" ] || settled=$((SECONDS + ${2:-0}))
			[ "$SECONDS" -lt "$settled" ] || break
		fi
		if ! pid_matches "$pid" "$mark"; then
			log_tail "$log"
			die "$1 (pid $pid) died"
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			log_tail "$log"
			die "$1 not live, or a MinIO server does not see all drives, after ${CL_MINIO_TIMEOUT}s"
		fi
		sleep 1
	done
	log "$1 live on $url; every running server sees the drives"
}

minio_up() {
	"$services/minio.sh" install >&2
	local n started=""
	for n in "${MINIO_NODES[@]}"; do
		node_running "$n" || started=1
		minio_start "$n"
	done
	for n in "${MINIO_NODES[@]}"; do minio_wait "$n"; done
	# The servers connected to each other's drives while they came up one by one: give their drive
	# monitors one round (see MINIO_SETTLE).
	[ -z "$started" ] || minio_wait "${MINIO_NODES[0]}" "$MINIO_SETTLE"
	minio_node minio1
	minio_ensure_bucket
	log "bucket $MINIO_BUCKET present"
}

# ---------------------------------------------------------------------------------------------------
# Commands

cmd_env() {
	local urls=() n
	for n in "${RABBIT_NODES[@]}"; do urls+=("amqp://guest:guest@127.0.0.1:$((5700 + $(node_num "$n")))/"); done
	echo "export GRIDCRAWL_AMQP_URL=$(IFS=,; echo "${urls[*]}")"
	urls=()
	for n in "${ES_NODES[@]}"; do urls+=("http://127.0.0.1:$((9210 + $(node_num "$n")))"); done
	echo "export GRIDCRAWL_ES_URL=$(IFS=,; echo "${urls[*]}")"
	echo "export GRIDCRAWL_ES_REPLICAS=1"
	urls=()
	for n in "${MINIO_NODES[@]}"; do urls+=("127.0.0.1:$((9300 + $(node_num "$n")))"); done
	echo "export GRIDCRAWL_S3_ENDPOINT=$(IFS=,; echo "${urls[*]}")"
	echo "export GRIDCRAWL_S3_ACCESS_KEY=$MINIO_USER"
	echo "export GRIDCRAWL_S3_SECRET_KEY=$MINIO_PASSWORD"
	echo "export GRIDCRAWL_S3_BUCKET=$MINIO_BUCKET"
}

cmd_up() {
	local t0=$SECONDS
	need_cmd jq "apt-get install jq"
	need_cmd curl
	rabbit_up
	es_up
	minio_up
	log "clusters up in $((SECONDS - t0))s"
	cmd_env
}

# stop_nodes NAME... stops the running nodes in parallel (SIGTERM, clean shutdown; SIGKILL after 90 s).
stop_nodes() {
	local n pids=() failed=0 p
	for n in "$@"; do
		(
			node "$n"
			if running "$NODE_PID" "$NODE_MARK"; then
				GC_NAME="cluster $n" stop_pid "$NODE_PID" "$NODE_MARK" 90
			else
				rm -f "$NODE_PID"
			fi
		) &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || failed=1; done
	[ "$failed" = 0 ] || die "could not stop every node of: $*"
}

cmd_down() {
	stop_nodes "${MINIO_NODES[@]}"
	stop_nodes "${ES_NODES[@]}"
	stop_nodes "${RABBIT_NODES[@]}"
	epmd_release "$RMQ_EPMD_MARK"
	log "all cluster nodes stopped (data kept in $CL_DIR)"
}

cmd_wipe() {
	cmd_down
	log "deleting all cluster data in $CL_DIR"
	rm -rf "${ALL_NODES[@]/#/$CL_DIR/}" "$MINIO_DRIVES" "$RMQ_COOKIE_FILE" "$ES_BOOTSTRAPPED"
}

cmd_kill() {
	[ "$#" -eq 1 ] || die "usage: $0 kill NODE"
	node "$1"
	local pid
	pid=$(read_pid "$NODE_PID")
	pid_matches "$pid" "$NODE_MARK" || die "$1 is not running"
	kill -9 "$pid"
	log "killed $1 (pid $pid) with SIGKILL"
}

cmd_start() {
	[ "$#" -eq 1 ] || die "usage: $0 start NODE"
	node "$1"
	case "$(node_kind "$1")" in
	rabbitmq)
		rabbit_start "$1"
		rabbit_wait_app "$1"
		rabbit_wait_member "$1"
		;;
	elasticsearch)
		es_start "$1"
		es_wait_joined "$1"
		;;
	minio)
		minio_start "$1"
		minio_wait "$1" "$MINIO_SETTLE"
		;;
	esac
}

# rss_kb PID prints the resident set size of PID in KiB.
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

cmd_nodes() {
	local n pid state total=0 rss
	printf '%-8s %-8s %-8s %-12s %s\n' NODE STATE PID PORTS RSS_MB
	for n in "${ALL_NODES[@]}"; do
		node "$n"
		pid=$(read_pid "$NODE_PID")
		rss=0
		if pid_matches "$pid" "$NODE_MARK"; then
			state=running
			rss=$(rss_kb "$pid")
			total=$((total + rss))
		else
			state=stopped
			pid=-
		fi
		printf '%-8s %-8s %-8s %-12s %s\n' "$n" "$state" "$pid" "${NODE_PORTS// /,}" "$((rss / 1024))"
	done
	printf 'total RSS %d MB\n' "$((total / 1024))"
}

cmd_status() {
	local n ok=0 h
	cmd_nodes
	for n in "${ALL_NODES[@]}"; do node_running "$n" || ok=1; done
	for n in "${RABBIT_NODES[@]}"; do
		node_running "$n" || continue
		h=$(rabbit_running_nodes "$n" | sort | tr '\n' ' ')
		echo "rabbitmq: running members seen by $n: $h"
		[ "$h" = "${RABBIT_NODES[*]} " ] || ok=1
		break
	done
	for n in "${ES_NODES[@]}"; do
		node_running "$n" || continue
		h=$(curl -sf --max-time 10 "$ES_URL_N/_cluster/health" | jq -r '"\(.status), \(.number_of_nodes) nodes"') || h="no answer"
		echo "elasticsearch: $h (seen by $n)"
		case "$h" in "green, ${#ES_NODES[@]} nodes" | "yellow, ${#ES_NODES[@]} nodes") ;; *) ok=1 ;; esac
		break
	done
	for n in "${MINIO_NODES[@]}"; do
		node_running "$n" || continue
		if curl -sf --max-time 5 -o /dev/null "$MINIO_URL/minio/health/cluster"; then
			echo "minio: write quorum (seen by $n)"
		else
			echo "minio: NO write quorum (seen by $n)"
			ok=1
		fi
		break
	done
	return "$ok"
}

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

cmd="${1:-}"
[ "$#" -eq 0 ] || shift
case "$cmd" in
up | down | wipe | start)
	take_lock
	"cmd_$cmd" "$@"
	;;
env | status | nodes | kill) "cmd_$cmd" "$@" ;;
leader-node)
	[ "${1:-}" = rabbitmq ] || die "usage: $0 leader-node rabbitmq"
	leader_node
	;;
primary-node)
	[ "${1:-}" = elasticsearch ] || die "usage: $0 primary-node elasticsearch [INDEX_PREFIX]"
	primary_node "${2:-}"
	;;
*) usage ;;
esac
