#!/usr/bin/env bash
# Stops the local backends that scripts/services/up.sh started (those recorded in our pid files; a
# backend the user runs on the same port is left alone) and keeps their data. Idempotent. Arguments
# select a subset (default: all). Exits non-zero, naming the backend, if one could not be stopped.
set -euo pipefail

GC_NAME=down
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"

all=(minio elasticsearch rabbitmq)
if [ "$#" -gt 0 ]; then services=("$@"); else services=("${all[@]}"); fi
failed=()
for s in "${services[@]}"; do
	case " ${all[*]} " in *" $s "*) ;; *) die "unknown backend '$s' (known: ${all[*]})" ;; esac
	"$here/$s.sh" stop >&2 || failed+=("$s")
done
[ "${#failed[@]}" -eq 0 ] || die "could not stop: ${failed[*]}"
log "stopped: ${services[*]}"
