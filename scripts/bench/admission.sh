#!/usr/bin/env bash
# Key admission and delta checkpoints:
# 1. a server table's memory under a power-law stream of --distinct_keys keys
#    with and without admission (keel bench admission);
# 2. full against delta checkpoints of a table of 10^7 keys, 1% changed
#    between checkpoints (keel bench checkpoint);
# 3. the AUC cost of admission on the 10^6-row datagen set of train.sh
#    (configs/linear_learner.flags, 2 servers, 2 workers), and the rows kept.
# Figures go to docs/BENCHMARKS.md.
#
#   scripts/bench/admission.sh [DISTINCT_KEYS]
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
distinct="${1:-100000000}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-train}"
keel=$(keel_binary)
metric() { grep -o "\"$2\": [-0-9.e]*" "$1" | awk '{print $2}'; }

echo "== a table under a power-law stream"
/usr/bin/time -f "%e s, %M KiB peak resident" "$keel" bench admission --distinct_keys="$distinct" \
  2>&1 | grep -v '^{'
echo "== full against delta checkpoints"
$keel bench checkpoint --checkpoint_keys=10000000 --changed_share=0.01 --rounds=5 2>/dev/null |
  grep -v '^{'

cached_train_set "$work/linear"
echo "== the AUC cost of admission (10^6 rows, 10^5 features)"
for admit in 0 2 3 5 10; do
  $keel launch --servers=2 --workers=2 --flagfile=configs/linear_learner.flags \
    --train="$work/linear/train" --validation="$work/linear/validation" \
    --model_dir="$work/model-admit-$admit" --admit_after=$admit --minloglevel=1 \
    > "$work/log-admit-$admit.txt" 2>&1
  # Rows made on the servers over the job (the weights' and the bias's).
  rows=$(grep -o '"rows_created": [0-9]*' "$work/model-admit-$admit/history.jsonl" |
    awk '{s += $2} END {print s}')
  printf 'admit_after=%-3s validation AUC %s, logloss %s, %s epochs, %s rows made\n' \
    "$admit" "$(metric "$work/model-admit-$admit/metrics.json" validation:roc_auc_score)" \
    "$(metric "$work/model-admit-$admit/metrics.json" validation:objective_loss)" \
    "$(metric "$work/model-admit-$admit/metrics.json" train:epochs)" "$rows"
done
