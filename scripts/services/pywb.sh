#!/usr/bin/env bash
# warcio and pywb (Webrecorder's WARC library and replay system) for the archive test
# (services/internal/grid, TestArchiveReplaysInPywb), in a Python venv, without Docker.
#
#   scripts/services/pywb.sh {install|check|env}
#
# install  creates the venv ${GRIDCRAWL_PYWB_VENV:-$SERVICES_DIR/pywb-venv} with python3 -m venv
#          and installs the pinned versions below from PyPI (pip); a venv that already has them
#          is kept. Needs python3 with the venv module (Debian: python3-venv, installed with
#          apt-get when missing).
# check    runs warcio, wb-manager and wayback from the venv and fails unless they answer.
# Prints nothing on stdout but `env` output: GRIDCRAWL_PYWB_VENV=<dir>.
set -euo pipefail

GC_NAME=pywb
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PYWB_VERSION=2.9.1
WARCIO_VERSION=1.7.5
VENV="${GRIDCRAWL_PYWB_VENV:-$SERVICES_DIR/pywb-venv}"

installed() {
	[ -x "$VENV/bin/python" ] &&
		"$VENV/bin/python" - "$PYWB_VERSION" "$WARCIO_VERSION" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if (version("pywb"), version("warcio")) == (sys.argv[1], sys.argv[2]) else 1)
PY
}

cmd_install() {
	if installed; then
		log "pywb $PYWB_VERSION and warcio $WARCIO_VERSION are installed in $VENV"
		return 0
	fi
	ensure_cmd python3 python3
	if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
		log "python3 has no venv module; installing Debian package python3-venv"
		apt_install python3-venv
	fi
	mkdir -p "$(dirname "$VENV")"
	rm -rf "$VENV"
	python3 -m venv "$VENV" >&2
	"$VENV/bin/pip" install --disable-pip-version-check -q "pywb==$PYWB_VERSION" "warcio==$WARCIO_VERSION" >&2 || {
		rm -rf "$VENV"
		die "pip could not install pywb==$PYWB_VERSION warcio==$WARCIO_VERSION from PyPI"
	}
	installed || die "installed, but $VENV does not report pywb $PYWB_VERSION and warcio $WARCIO_VERSION"
	log "installed pywb $PYWB_VERSION and warcio $WARCIO_VERSION in $VENV"
}

cmd_check() {
	installed || die "pywb $PYWB_VERSION / warcio $WARCIO_VERSION missing in $VENV (run: $0 install)"
	"$VENV/bin/warcio" --help >/dev/null || die "warcio does not run"
	"$VENV/bin/wb-manager" --help >/dev/null || die "wb-manager does not run"
	"$VENV/bin/wayback" --help >/dev/null || die "wayback does not run"
	log "warcio, wb-manager and wayback run"
}

cmd_env() { printf 'GRIDCRAWL_PYWB_VENV=%s\n' "$VENV"; }
cmd_status() {
	if installed; then log "installed: $VENV"; else log "not installed"; fi
}
cmd_start() { cmd_check; }
cmd_stop() { :; }

dispatch "$@"
