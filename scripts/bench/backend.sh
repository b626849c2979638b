#!/usr/bin/env bash
# Compute-backend benchmark: `keel bench backend` (the backend alone: data read
# once into minibatches, timed passes of forward + backward, no servers) on
# `keel datagen` data, for the linear learner and the factorization machine,
# with --threads 1 and 2 side by side. Runs alternate between thread counts
# (ROUNDS rounds), each run reports its median pass; the summary is the median
# over rounds and the ratio. Figures go to docs/BENCHMARKS.md.
#
#   scripts/bench/backend.sh [ROWS] [ROUNDS] [DEVICE]
#
# DEVICE defaults to cpu; on a GPU machine `scripts/bench/backend.sh 200000 5
# cuda:0` measures the CUDA backend beside the CPU's one and two threads.
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
rows="${1:-200000}"
rounds="${2:-5}"
device="${3:-cpu}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-backend}"
keel=$(keel_binary KEEL)

cached_datagen "$work/sparse" --model=fm --rows="$rows" --features=100000 --nnz=20 \
  --num_factors=8 --seed=5 --train_files=1

# name, then the flags of one configuration
configs=(
  "linear_learner binary|--job=linear_learner"
  "factorization_machines k=8|--job=factorization_machines --num_factors=8"
  "factorization_machines k=64|--job=factorization_machines --num_factors=64"
)
variants=("--device=cpu --threads=1" "--device=cpu --threads=2")
[ "$device" = cpu ] || variants+=("--device=$device")

echo "== $rows rows of 20 non-zeros (100000 features), minibatches of 1000, $rounds rounds"
for config in "${configs[@]}"; do
  name="${config%%|*}"
  flags="${config#*|}"
  declare -A results=()
  for ((round = 0; round < rounds; ++round)); do
    for variant in "${variants[@]}"; do
      # shellcheck disable=SC2086
      value=$($keel bench backend --data="$work/sparse/train" $flags $variant \
        --mini_batch_size=1000 --epochs=3 --minloglevel=1 | grep -o '"examples_per_s":[0-9]*' |
        cut -d: -f2)
      results[$variant]+="$value "
    done
  done
  base=$(echo "${results[${variants[0]}]}" | tr ' ' '\n' | grep . | median)
  for variant in "${variants[@]}"; do
    m=$(echo "${results[$variant]}" | tr ' ' '\n' | grep . | median)
    printf '%-30s %-28s %10.0f examples/s  x%.2f   (runs: %s)\n' "$name" "$variant" "$m" \
      "$(echo "$m / $base" | bc -l)" "${results[$variant]}"
  done
  unset results
done
