#!/usr/bin/env bash
# The embedded default: a local cluster (scheduler, 2 servers, 2 workers as
# local processes on loopback) measuring push/pull, dense and sparse.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/keel bench kv --servers=2 --workers=2 --mode=all --bench_seconds=1 "$@"
