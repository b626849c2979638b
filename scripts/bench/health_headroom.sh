#!/usr/bin/env bash
# Training health's exploding-gradient rule against the built-in jobs: runs
# the default jobs (binary, regressor, 10-class linear learner; binary
# factorization machine) and configs/*.flags on datagen sets, and prints per
# job whether a health rule fired, the epochs with a `health` object in
# history.jsonl, and the largest ratio of a minibatch's gradient norm to its
# running median over every worker and epoch (the rule fires above 1000).
# Not timed. 2 servers, 2 workers; data: seed 11, 20 non-zeros a row.
#
#   scripts/bench/health_headroom.sh [ROWS] [FEATURES]   # defaults 200000 20000
#   KEEL_BENCH_DIR (default /tmp/keel-bench-health), KEEL (default build/keel)
set -uo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
rows="${1:-200000}"
features="${2:-20000}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-health}"
keel=$(keel_binary KEEL)
mkdir -p "$work"
gen() {  # name [datagen flags]
  cached_datagen "$work/$1" --rows="$rows" --features="$features" --nnz=20 --seed=11 "${@:2}"
}
gen binary
gen fm --model=fm --num_factors=4
gen regression --predictor_type=regressor --label_offset=150 --label_scale=60
gen multiclass --predictor_type=multiclass_classifier --num_classes=10
run() {  # label data [flags]
  local label=$1 data=$2 log="$work/log-$1.txt"
  shift 2
  rm -rf "$work/model-$label"
  "$keel" launch --servers=2 --workers=2 --train="$work/$data/train" \
    --validation="$work/$data/validation" --model_dir="$work/model-$label" \
    --feature_dim="$features" "$@" >"$log" 2>&1
  local code=$?
  printf '%-20s exit %d, rule fired %d, health epochs %d, largest norm/median: %s\n' \
    "$label" "$code" "$(grep -c 'training health:' "$log")" \
    "$(grep -c '"health"' "$work/model-$label/history.jsonl" 2>/dev/null)" \
    "$(grep -o 'running median: weights [0-9.e+-]*, bias [0-9.e+-]*' "$log" |
       awk '{w = $4 + 0; b = $6 + 0; if (w > mw) mw = w; if (b > mb) mb = b}
            END {printf "weights %.2f, bias %.2f", mw, mb}')"
}
run linear-binary binary --job=linear_learner
run linear-regressor regression --job=linear_learner --predictor_type=regressor
run linear-multiclass multiclass --job=linear_learner --predictor_type=multiclass_classifier \
  --num_classes=10
run fm-binary fm --job=factorization_machines --num_factors=4
run config-linear binary --flagfile=configs/linear_learner.flags
run config-fm fm --flagfile=configs/factorization_machines.flags
