#!/usr/bin/env bash
# The Python tools the archive tests check gridcrawl's output with, in one Python venv, without
# Docker: pywb (Webrecorder's replay system), warcio (its WARC library), wacz (the reference WACZ
# implementation, `wacz validate`) and FastWARC (Resiliparse's WARC reader).
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
WACZ_VERSION=0.6.0
FASTWARC_VERSION=2.0.1
VENV="${GRIDCRAWL_PYWB_VENV:-$SERVICES_DIR/pywb-venv}"

installed() {
	[ -x "$VENV/bin/python" ] &&
		"$VENV/bin/python" - "$PYWB_VERSION" "$WARCIO_VERSION" "$WACZ_VERSION" "$FASTWARC_VERSION" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
got = (version("pywb"), version("warcio"), version("wacz"), version("fastwarc"))
sys.exit(0 if got == tuple(sys.argv[1:5]) else 1)
PY
}

cmd_install() {
	if installed; then
		log "pywb $PYWB_VERSION, warcio $WARCIO_VERSION, wacz $WACZ_VERSION and fastwarc $FASTWARC_VERSION are installed in $VENV"
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
	"$VENV/bin/pip" install --disable-pip-version-check -q "pywb==$PYWB_VERSION" "warcio==$WARCIO_VERSION" \
		"wacz==$WACZ_VERSION" "fastwarc==$FASTWARC_VERSION" >&2 || {
		rm -rf "$VENV"
		die "pip could not install pywb==$PYWB_VERSION warcio==$WARCIO_VERSION wacz==$WACZ_VERSION fastwarc==$FASTWARC_VERSION from PyPI"
	}
	installed || die "installed, but $VENV does not report pywb $PYWB_VERSION, warcio $WARCIO_VERSION, wacz $WACZ_VERSION and fastwarc $FASTWARC_VERSION"
	log "installed pywb $PYWB_VERSION, warcio $WARCIO_VERSION, wacz $WACZ_VERSION and fastwarc $FASTWARC_VERSION in $VENV"
}

cmd_check() {
	installed || die "pywb $PYWB_VERSION / warcio $WARCIO_VERSION / wacz $WACZ_VERSION / fastwarc $FASTWARC_VERSION missing in $VENV (run: $0 install)"
	"$VENV/bin/warcio" --help >/dev/null || die "warcio does not run"
	"$VENV/bin/wb-manager" --help >/dev/null || die "wb-manager does not run"
	"$VENV/bin/wayback" --help >/dev/null || die "wayback does not run"
	"$VENV/bin/wacz" --help >/dev/null || die "wacz does not run"
	"$VENV/bin/python" -c 'import fastwarc.warc' || die "fastwarc does not import"
	log "warcio, wb-manager, wayback, wacz and fastwarc run"
}

cmd_env() { printf 'GRIDCRAWL_PYWB_VENV=%s\n' "$VENV"; }
cmd_status() {
	if installed; then log "installed: $VENV"; else log "not installed"; fi
}
cmd_start() { cmd_check; }
cmd_stop() { :; }

dispatch "$@"
