#!/usr/bin/env bash
# Installs a YaCy client that gridcrawl did not write, for the test that
# speaks to /yacysearch.json through it (services/internal/mcp,
# TestYaCySearxClient): searx 0.17.0 from PyPI, whose engine
# searx/engines/yacy.py is a metasearch engine's YaCy adapter, in a Python
# virtual environment outside the repository. Prints on stdout
#
#   export GRIDCRAWL_SEARX_PYTHON=/path/to/venv/bin/python
#
# so that `eval "$(scripts/yacyclient/setup.sh)"` lets the test find it;
# everything else goes to stderr. Idempotent: an installed venv is only
# checked. searx's own pins (lxml 4.5, pyyaml 5.3...) do not build on
# current Pythons, so searx is installed without them and the few modules
# its YaCy engine imports are installed at pinned current versions.
set -euo pipefail

dir="${GRIDCRAWL_YACYCLIENT_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gridcrawl-yacyclient}"
venv="$dir/searx-0.17.0"
py="$venv/bin/python"

check() { "$py" -c 'import searx, searx.utils, dateutil.parser' >/dev/null 2>&1; }

if ! check; then
	# searx 0.17 imports the module imp, which Python 3.12 removed.
	python=""
	for c in python3.11 python3.10 python3.9 python3; do
		if command -v "$c" >/dev/null && "$c" -c 'import imp, venv' 2>/dev/null; then python=$(command -v "$c"); break; fi
	done
	[ -n "$python" ] || { echo "setup.sh: no Python 3.9 to 3.11 with venv is installed (searx 0.17 needs one)" >&2; exit 1; }
	mkdir -p "$dir"
	rm -rf "$venv"
	"$python" -m venv "$venv" >&2
	# pip complains of searx's unmet pins: its log is shown only on failure.
	log="$dir/pip.log"
	{
		"$py" -m pip install --disable-pip-version-check --no-deps 'searx==0.17.0' &&
			"$py" -m pip install --disable-pip-version-check \
				'babel==2.14.0' 'lxml==5.3.0' 'certifi==2024.8.30' 'pyyaml==6.0.2' 'python-dateutil==2.9.0.post0'
	} >"$log" 2>&1 || { cat "$log" >&2; echo "setup.sh: pip install failed" >&2; exit 1; }
	check || { echo "setup.sh: searx installed but its YaCy engine cannot be imported" >&2; exit 1; }
fi
echo "export GRIDCRAWL_SEARX_PYTHON=$py"
