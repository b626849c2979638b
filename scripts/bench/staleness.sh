#!/usr/bin/env bash
# Staleness-aware steps: the default linear learner (no hyperparameter but the
# job, predictor_type and feature_dim) on a `keel datagen` linear set, with 4
# servers and several asynchronous worker counts, the servers' staleness-aware
# steps on and off, beside the same job under --staleness=0 (bulk-synchronous).
# Prints one line per run: validation log loss and AUC. Figures go to
# docs/BENCHMARKS.md. Not a timed test: the quality of the model is measured.
#
#   scripts/bench/staleness.sh [ROWS] [EPOCHS] [WORKER COUNTS...]
#   e.g. scripts/bench/staleness.sh 200000 3 2 8 16
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
rows="${1:-200000}"
epochs="${2:-3}"
shift 2 || true
worker_counts=("$@")
[ ${#worker_counts[@]} -gt 0 ] || worker_counts=(2 8 16)
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-staleness}"
keel=$(keel_binary KEEL)
features=100000
data="$work/linear-$rows"

metric() { grep -o "\"$2\": [-0-9.e]*" "$1" | awk '{print $2}'; }

cached_datagen "$data" --model=linear --rows="$rows" --features=$features --nnz=20 --seed=11
echo "== $rows training rows, $features features; default linear learner, $epochs epochs, 4 servers"
echo "oracle: validation log loss $(metric "$data/oracle.json" validation:objective_loss)," \
  "AUC $(metric "$data/oracle.json" validation:roc_auc_score)"

run() {  # label workers [flags]
  local label=$1 workers=$2; shift 2
  local dir="$work/model-$label"
  local start end
  start=$(date +%s.%N)
  $keel launch --servers=4 --workers="$workers" --job=linear_learner \
    --predictor_type=binary_classifier --feature_dim=$features --epochs="$epochs" \
    --train="$data/train" --validation="$data/validation" --model_dir="$dir" --minloglevel=1 \
    "$@" > "$work/log-$label.txt" 2>&1
  end=$(date +%s.%N)
  printf '%-30s validation log loss %s, AUC %s (%.0f s)\n' "$label" \
    "$(metric "$dir/metrics.json" validation:objective_loss)" \
    "$(metric "$dir/metrics.json" validation:roc_auc_score)" "$(echo "$end - $start" | bc)"
}

for workers in "${worker_counts[@]}"; do
  run "w$workers-staleness0" "$workers" --staleness=0
  run "w$workers-staleness0-unscaled" "$workers" --staleness=0 --staleness_aware_steps=false
  run "w$workers-async" "$workers"
  run "w$workers-async-unscaled" "$workers" --staleness_aware_steps=false
done
