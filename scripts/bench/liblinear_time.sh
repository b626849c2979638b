#!/usr/bin/env bash
# Time to LIBLINEAR's best AUC: LIBLINEAR (-s 0 -c 0.1, its better setting on
# this data; -c 1 once) trains the 10^6-row linear set of the training benchmark
# from its one file, reading included, and Keel trains the same rows as a user
# launches it (`keel launch`, 1 server and 1 worker, the linear learner's
# defaults) for as many epochs as it takes to pass LIBLINEAR's validation AUC.
# Both are timed as wall time, in alternating rounds (beside another build's
# keel when KEEL_BASELINE names one). Prints every figure; they go to
# docs/BENCHMARKS.md ("Throughput").
#
#   [KEEL_BASELINE=OTHER/build/keel] scripts/bench/liblinear_time.sh [ROUNDS] [EPOCHS]
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
rounds="${1:-3}"
epochs="${2:-1}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-train}"
keel=$(keel_binary)
data="$work/linear"
install_missing liblinear-train liblinear-tools
cached_train_set "$data"
[ -f "$work/linear-train.libsvm" ] || cat "$data"/train/* > "$work/linear-train.libsvm"

seconds() { echo "$2 - $1" | bc; }

liblinear() {  # $1: C
  local model="$work/liblinear-$1.model" seconds
  seconds=$(liblinear_fit "$1" "$work/linear-train.libsvm" "$model")
  printf 'liblinear -c %-4s %.2f s, validation AUC %s\n' "$1" "$seconds" \
    "$(liblinear_auc "$data/validation/part-0.libsvm" "$model" "$model.out")"
}

keel_job() {  # $1: the keel binary, $2: a name
  local start end model="$work/liblinear-time-model"
  rm -rf "$model"
  start=$(now_ns)
  "$1" launch --servers=1 --workers=1 --flagfile=configs/linear_learner.flags \
    --train="$data/train" --validation="$data/validation" --epochs="$epochs" \
    --model_dir="$model" --minloglevel=1 > "$work/liblinear-time-keel.log" 2>&1
  end=$(now_ns)
  printf 'keel %-9s %.2f s, validation AUC %s (%s epoch(s), launch to exit)\n' "$2" \
    "$(seconds "$start" "$end")" \
    "$(grep -o '"validation:roc_auc_score": [0-9.]*' "$model/metrics.json" | awk '{print $2}')" \
    "$epochs"
}

liblinear 1
baseline="${KEEL_BASELINE:-}"
# The two builds take turns going first: the run just after LIBLINEAR's was
# the slower one in every round of a session where "this" always went first.
for round in $(seq "$rounds"); do
  echo "-- round $round"
  liblinear 0.1
  if [ -n "$baseline" ] && [ $((round % 2)) -eq 0 ]; then
    keel_job "$baseline" baseline
    keel_job "$keel" this
  else
    keel_job "$keel" this
    [ -z "$baseline" ] || keel_job "$baseline" baseline
  fi
done
