#!/usr/bin/env bash
# ReplayWeb.page (Webrecorder's in-browser replay of WARC and WACZ files), for the browser test that
# opens gridcrawl's WACZ in it. Not a server: the test serves the package's files itself.
#
#   scripts/services/replayweb.sh {install|check|env}
#
# install  fetches the npm package replaywebpage at the pinned version below with `npm pack` (the
#          tarball only: ui.js and sw.js are built bundles, no dependency is installed, no script runs)
#          and unpacks it into ${GRIDCRAWL_REPLAYWEB_DIR:-$SERVICES_DIR/replayweb}; a directory that
#          already holds that version is kept. Needs npm (Debian: npm, installed with apt-get when missing).
# check    fails unless the directory holds that version's ui.js, sw.js and index.html.
# Prints nothing on stdout but `env` output: GRIDCRAWL_REPLAYWEB_DIR=<dir>.
set -euo pipefail

GC_NAME=replayweb
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REPLAYWEB_VERSION=2.5.3
# The package's integrity as the npm registry states it (npm pack checks it too).
REPLAYWEB_INTEGRITY=sha512-nCj2PSON3BxeSJKE8AsYPyULv0XPZKJWfy4l9PyQre9SqwLZ+WKZVs/sfLqPOQ4GrH+0YkjbwOhr8cSTH08gsQ==
DIR="${GRIDCRAWL_REPLAYWEB_DIR:-$SERVICES_DIR/replayweb}"

installed() {
	[ -f "$DIR/ui.js" ] && [ -f "$DIR/sw.js" ] && [ -f "$DIR/index.html" ] && [ -f "$DIR/package.json" ] &&
		grep -q "\"version\": \"$REPLAYWEB_VERSION\"" "$DIR/package.json"
}

cmd_install() {
	if installed; then
		log "replaywebpage $REPLAYWEB_VERSION is in $DIR"
		return 0
	fi
	ensure_cmd npm npm
	local tmp
	tmp=$(mktemp -d)
	(cd "$tmp" && npm pack --silent "replaywebpage@$REPLAYWEB_VERSION" >/dev/null) || {
		rm -rf "$tmp"
		die "npm pack could not fetch replaywebpage@$REPLAYWEB_VERSION"
	}
	local tgz="$tmp/replaywebpage-$REPLAYWEB_VERSION.tgz" got
	got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
	[ "$got" = "$REPLAYWEB_INTEGRITY" ] || {
		rm -rf "$tmp"
		die "replaywebpage-$REPLAYWEB_VERSION.tgz has integrity $got, want $REPLAYWEB_INTEGRITY"
	}
	mkdir -p "$tmp/x"
	tar -xzf "$tgz" -C "$tmp/x"
	rm -rf "$DIR"
	mkdir -p "$(dirname "$DIR")"
	mv "$tmp/x/package" "$DIR"
	rm -rf "$tmp"
	installed || die "unpacked, but $DIR does not hold replaywebpage $REPLAYWEB_VERSION's ui.js, sw.js and index.html"
	log "installed replaywebpage $REPLAYWEB_VERSION in $DIR"
}

cmd_check() {
	installed || die "replaywebpage $REPLAYWEB_VERSION missing in $DIR (run: $0 install)"
	log "replaywebpage $REPLAYWEB_VERSION: ui.js, sw.js and index.html in $DIR"
}

cmd_env() { printf 'GRIDCRAWL_REPLAYWEB_DIR=%s\n' "$DIR"; }
cmd_status() {
	if installed; then log "installed: $DIR"; else log "not installed"; fi
}
cmd_start() { cmd_check; }
cmd_stop() { :; }

dispatch "$@"
