#!/usr/bin/env bash
# Headless Chromium for the dashboard's browser test (services/internal/mcp), without Docker.
#
#   scripts/services/chromium.sh {install|check}
#
# install  installs Debian's `chromium` package (apt-get, as root or through sudo -n) when
#          /usr/bin/chromium (or $GRIDCRAWL_CHROMIUM) is missing; an installed one is kept.
# check    starts the browser headless on about:blank with the flags the test uses and a new empty
#          profile directory, and fails when it does not print its version or cannot dump the DOM.
# Prints nothing on stdout but `env` output: GRIDCRAWL_CHROMIUM=<path>.
set -euo pipefail

GC_NAME=chromium
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CHROMIUM_BIN="${GRIDCRAWL_CHROMIUM:-/usr/bin/chromium}"

cmd_install() {
	if [ -x "$CHROMIUM_BIN" ]; then
		log "$CHROMIUM_BIN is installed: $("$CHROMIUM_BIN" --version 2>/dev/null || echo 'version unknown')"
		return 0
	fi
	log "$CHROMIUM_BIN is missing; installing Debian package chromium"
	apt_install chromium
	[ -x "$CHROMIUM_BIN" ] || die "installed chromium but $CHROMIUM_BIN is still missing"
	log "installed $("$CHROMIUM_BIN" --version 2>/dev/null || echo chromium)"
}

cmd_check() {
	[ -x "$CHROMIUM_BIN" ] || die "$CHROMIUM_BIN is missing (run: $0 install)"
	local dir out
	dir=$(mktemp -d)
	# shellcheck disable=SC2064 # expand now
	trap "rm -rf '$dir'" RETURN
	out=$(timeout 60 "$CHROMIUM_BIN" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--user-data-dir="$dir" --dump-dom 'data:text/html,<p>gridcrawl-ok</p>' 2>"$dir.log") || {
		log_tail "$dir.log"
		rm -f "$dir.log"
		die "chromium did not start headless"
	}
	rm -f "$dir.log"
	case "$out" in
	*gridcrawl-ok*) log "chromium works headless" ;;
	*) die "chromium started but did not render a page" ;;
	esac
}

cmd_env() { printf 'GRIDCRAWL_CHROMIUM=%s\n' "$CHROMIUM_BIN"; }
cmd_status() {
	if [ -x "$CHROMIUM_BIN" ]; then log "installed: $CHROMIUM_BIN"; else log "not installed"; fi
}
cmd_start() { cmd_check; }
cmd_stop() { :; }

dispatch "$@"
