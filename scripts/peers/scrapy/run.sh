#!/usr/bin/env bash
# Runs the Scrapy peer of scripts/bench -peers. It creates a venv outside the
# repository (~/.cache/gridcrawl-peers, or $GRIDCRAWL_PEERS_VENV) with a
# pinned Scrapy from PyPI the first time, then runs crawl.py in it.
#
#   scripts/peers/scrapy/run.sh --setup        # create the venv only
#   scripts/peers/scrapy/run.sh --urls start-urls.txt --delay-ms 10 --depth 4 --out /tmp/scrapy
set -euo pipefail
SCRAPY_VERSION=2.19.0
venv="${GRIDCRAWL_PEERS_VENV:-$HOME/.cache/gridcrawl-peers/scrapy-$SCRAPY_VERSION}"
if [ ! -x "$venv/bin/scrapy" ]; then
	mkdir -p "$(dirname "$venv")"
	python3 -m venv "$venv"
	if ! "$venv/bin/pip" install -q "scrapy==$SCRAPY_VERSION" >"$venv.pip.log" 2>&1; then
		cat "$venv.pip.log" >&2
		exit 1
	fi
fi
if [ "${1:-}" = "--setup" ]; then
	exit 0
fi
exec "$venv/bin/python" "$(dirname "$0")/crawl.py" "$@"
