#!/usr/bin/env bash
# The control plane at scale: keel bench control (the scheduler's own code
# under N simulated members: a registration storm, heartbeats at the default
# 1 s, one worker killed) for each N, with 10^4 key ranges. Over loopback TCP
# where the descriptor limit allows (the members in processes of their own
# past what one process holds beside the scheduler's ends), in-process
# (MemoryNetwork) beyond; each report says which. Figures go to
# docs/BENCHMARKS.md ("Control plane").
#
#   scripts/bench/control.sh [N ...]        (default: 100 1000 10000)
#   KEEL_CONTROL_TRANSPORT=memory scripts/bench/control.sh 1000
#   KEEL_CONTROL_FLAGS=--view_deltas=false scripts/bench/control.sh   (the whole view each time)
#   KEEL_CONTROL_FLAGS=--heartbeat_relay_from=0 scripts/bench/control.sh 3800   (no relay)
#   KEEL=/tmp/build/keel scripts/bench/control.sh
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
keel=$(keel_binary KEEL)  # KEEL=path/to/keel to use another build
transport="${KEEL_CONTROL_TRANSPORT:-auto}"
log="${KEEL_BENCH_DIR:-/tmp}/keel-bench-control.log"
[ $# -gt 0 ] || set -- 100 1000 10000
for nodes in "$@"; do
  echo "== $nodes members ($transport; the scheduler's log in $log)"
  # shellcheck disable=SC2086
  "$keel" bench control --nodes="$nodes" --transport="$transport" --key_ranges=10000 \
    ${KEEL_CONTROL_FLAGS:-} 2>>"$log"
done
