#!/usr/bin/env bash
# The cost of metrics: the same small training job (configs/linear_learner.flags
# on `keel datagen` data, 1 server and 1 worker) with metrics off
# (--metrics=off) and on (--metrics=auto, the launch default, every role's
# /metrics scraped once a second while it runs, as Prometheus would). Runs
# alternate off/on, ROUNDS of each; each run's figure is the job's
# train:examples_per_second (metrics.json). Rounds alternate which goes first
# (off-on, on-off, ...), so an advantage of the first or second run of a pair
# cancels out. Prints every run and each round's
# on/off ratio, then the median and spread (min..max) of each, the ratio of
# the medians and the median of the rounds' ratios (runs side by side share
# the machine's load). Figures go to docs/BENCHMARKS.md.
#
#   scripts/bench/metrics_cost.sh [ROWS] [ROUNDS] [EPOCHS]
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
rows="${1:-200000}"
rounds="${2:-5}"
epochs="${3:-5}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-metrics}"
keel=$(keel_binary KEEL)

cached_datagen "$work/data" --model=linear --rows="$rows" --features=100000 --nnz=20 --seed=7

metric() { grep -o "\"$2\": [-0-9.e]*" "$1" | awk '{print $2}'; }

# Scrapes every role's /metrics (as `keel launch` printed them in log $1) once
# a second while process $2 runs.
scrape_while() {
  local log=$1 pid=$2
  while kill -0 "$pid" 2>/dev/null; do
    for url in $(grep -o 'http://127\.0\.0\.1:[0-9]*/metrics' "$log" 2>/dev/null | sort -u); do
      curl -s -m 2 -o /dev/null "$url" || true
    done
    sleep 1
  done
}

run() {  # off|on round
  local mode=$1 round=$2
  local log="$work/log-$mode-$round.txt" model="$work/model-$mode-$round"
  rm -rf "$model"
  local metrics=off
  [ "$mode" = on ] && metrics=auto
  $keel launch --servers=1 --workers=1 --flagfile=configs/linear_learner.flags \
    --train="$work/data/train" --epochs="$epochs" --model_dir="$model" --metrics=$metrics \
    --minloglevel=1 > "$log" 2>&1 &
  local pid=$!
  [ "$mode" = on ] && scrape_while "$log" "$pid"
  wait "$pid"
  metric "$model/metrics.json" train:examples_per_second
}

declare -A results=()
ratios=""
echo "== $rows rows, $epochs epochs, 1 server 1 worker, $rounds alternating rounds"
for ((round = 0; round < rounds; ++round)); do
  order="off on"
  [ $((round % 2)) -eq 1 ] && order="on off"
  for mode in $order; do
    value=$(run $mode $round)
    results[$mode]+="$value "
    declare "last_$mode=$value"
  done
  ratio=$(echo "$last_on / $last_off" | bc -l)
  ratios+="$ratio "
  printf 'round %d: off %8.0f, on %8.0f examples/s, on/off %.3f\n' "$round" "$last_off" \
    "$last_on" "$ratio"
done
for mode in off on; do
  values=$(echo "${results[$mode]}" | tr ' ' '\n' | grep .)
  printf 'metrics %-3s median %8.0f examples/s, spread %.0f .. %.0f\n' "$mode" \
    "$(echo "$values" | median)" "$(echo "$values" | sort -g | head -1)" \
    "$(echo "$values" | sort -g | tail -1)"
done
off=$(echo "${results[off]}" | tr ' ' '\n' | grep . | median)
on=$(echo "${results[on]}" | tr ' ' '\n' | grep . | median)
printf 'on / off: %.3f (medians); median of the rounds'"'"' ratios %.3f, spread %.3f .. %.3f\n' \
  "$(echo "$on / $off" | bc -l)" "$(echo "$ratios" | tr ' ' '\n' | grep . | median)" \
  "$(echo "$ratios" | tr ' ' '\n' | grep . | sort -g | head -1)" \
  "$(echo "$ratios" | tr ' ' '\n' | grep . | sort -g | tail -1)"
