#!/usr/bin/env bash
# Throughput benchmark: one worker's training speed as built (two minibatches
# in flight, the batch cache), with one minibatch in flight, and without the
# cache, side by side in alternating rounds (and beside another build's keel
# when KEEL_BASELINE names one), beside the compute backend alone on the same
# data; then ps-lite's own push/pull workload, dense pushes beside raw ZeroMQ,
# and a server table's memory per key. Prints every figure; they go to
# docs/BENCHMARKS.md ("Throughput").
#
#   [KEEL_BASELINE=OTHER/build/keel] scripts/bench/throughput.sh [ROUNDS] [EPOCHS]
#
# Data: the 10^6-row linear set of the training benchmark (scripts/bench/train.sh),
# generated once under KEEL_BENCH_DIR (default /tmp/keel-bench-train).
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
rounds="${1:-3}"
epochs="${2:-5}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-train}"
keel=$(keel_binary)
data="$work/linear"
cached_train_set "$data"

# One model, as the issue's figure asks; no early stop inside the run.
job=(--flagfile=configs/linear_learner.flags --num_models=1 --epochs="$epochs"
  --early_stopping_patience=1000 --minloglevel=1)

baseline="${KEEL_BASELINE:-}"
variants=(default depth1 nocache)
[ -n "$baseline" ] && variants+=(baseline)
echo "== 1 server, 1 worker, $data, $epochs epochs; rounds alternate: ${variants[*]}"
for round in $(seq "$rounds"); do
  for variant in "${variants[@]}"; do
    binary=$keel
    flags=()
    case "$variant" in
      depth1) flags=(--minibatches_in_flight=1) ;;
      nocache) flags=(--cache_dir=none) ;;
      baseline) binary=$baseline ;;
    esac
    echo "-- round $round, $variant"
    $binary bench train --data="$data" "${job[@]}" "${flags[@]}" 2>/dev/null |
      grep -E '^(keel bench train|after the first|\{)'
  done
done

echo "== the compute alone (keel bench backend, same data and job)"
$keel bench backend --data="$data/train" --flagfile=configs/linear_learner.flags \
  --num_models=1 --epochs=3 --minloglevel=1 2>/dev/null | head -1

echo "== ps-lite's workload (keel bench kv --workload=pslite), 1 server, 1 worker"
for inflight in 1 4; do
  for keys in 100000 1000000; do
    $keel bench kv --workload=pslite --mode=sparse --sparse_widths=1 --sparse_keys="$keys" \
      --inflight="$inflight" --small=false --bench_seconds=3 2>/dev/null | grep -E '^(keel|case|sparse)'
  done
done

echo "== dense pushes and pulls beside raw ZeroMQ (keel bench kv), 1 server, 1 worker"
$keel bench kv --mode=dense --bench_seconds=3 2>/dev/null | grep -E '^(keel|case|small|dense)'

echo "== a server table's memory per key (keel bench kv --mode=memory)"
$keel bench kv --mode=memory --sparse_widths=1,9,64 2>/dev/null | grep -v '^{'
