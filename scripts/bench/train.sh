#!/usr/bin/env bash
# Training benchmark: Keel's linear learner and factorization machine on
# `keel datagen` data (default 10^6 training rows, 10^5 features, 20 non-zeros
# a row), beside LIBLINEAR (Debian's liblinear-tools) on the same files, and
# each job's throughput. Prints a summary; the figures go to docs/BENCHMARKS.md.
#
#   scripts/bench/train.sh [ROWS] [FEATURES]
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
rows="${1:-1000000}"
features="${2:-100000}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-train}"
keel=$(keel_binary)
install_missing liblinear-train liblinear-tools

metric() { grep -o "\"$2\": [-0-9.e]*" "$1" | awk '{print $2}'; }

for model in linear fm; do
  cached_datagen "$work/$model" --model=$model --rows="$rows" --features="$features" --nnz=20 \
    --num_factors=4 --seed=11
done

echo "== data: $rows training rows, $features features, 20 non-zeros a row"
for model in linear fm; do
  bytes=$(cat "$work/$model"/train/* | wc -c)
  echo "$model: $((bytes / 1000000)) MB of libsvm training text"
done

run_keel() {  # job flagfile data label [extra flags]
  local job=$1 flags=$2 data=$3 label=$4; shift 4
  local start end
  start=$(now_ns)
  $keel launch --servers=2 --workers=2 --flagfile="$flags" --train="$data/train" \
    --validation="$data/validation" --model_dir="$work/model-$label" --minloglevel=1 "$@" \
    > "$work/log-$label.txt" 2>&1
  end=$(now_ns)
  printf '%-28s validation AUC %s (oracle %s), accuracy %s, logloss %s; %s epochs, %.1f s wall, %s examples/s per worker\n' \
    "$label" "$(metric "$work/model-$label/metrics.json" validation:roc_auc_score)" \
    "$(metric "$data/oracle.json" validation:roc_auc_score)" \
    "$(metric "$work/model-$label/metrics.json" validation:binary_classification_accuracy)" \
    "$(metric "$work/model-$label/metrics.json" validation:objective_loss)" \
    "$(metric "$work/model-$label/metrics.json" train:epochs)" \
    "$(echo "$end - $start" | bc)" \
    "$(metric "$work/model-$label/metrics.json" train:examples_per_second | awk '{printf "%d", $1/2}')"
}

echo "== keel (2 servers, 2 workers)"
run_keel linear_learner configs/linear_learner.flags "$work/linear" linear_learner
run_keel factorization_machines configs/factorization_machines.flags "$work/fm" factorization_machines
run_keel linear_learner configs/linear_learner.flags "$work/fm" linear_learner-on-fm-data

echo "== parse throughput (readers alone, one thread)"
$keel bench parse --data="$work/linear/train" --data_format=libsvm | head -1

echo "== one epoch end to end (1 server, 1 worker)"
start=$(now_ns)
$keel launch --servers=1 --workers=1 --flagfile=configs/linear_learner.flags \
  --train="$work/linear/train" --epochs=1 --minloglevel=1 > "$work/log-parse.txt" 2>&1
end=$(now_ns)
bytes=$(cat "$work/linear"/train/* | wc -c)
printf 'one epoch, 1 worker: %.1f s for %d MB (%.0f MB/s end to end, training included)\n' \
  "$(echo "$end - $start" | bc)" "$((bytes / 1000000))" \
  "$(echo "$bytes / 1000000 / ($end - $start)" | bc -l)"

echo "== LIBLINEAR (L2-regularized logistic regression, primal, -s 0, one thread)"
cat "$work/linear"/train/* > "$work/linear-train.libsvm"
validation="$work/linear/validation/part-0.libsvm"
for c in 0.1 1; do
  seconds=$(liblinear_fit "$c" "$work/linear-train.libsvm" "$work/liblinear-$c.model")
  auc=$(liblinear_auc "$validation" "$work/liblinear-$c.model" "$work/liblinear-$c.out")
  accuracy=$(paste -d' ' <(cut -d' ' -f1 "$validation") \
      <(tail -n +2 "$work/liblinear-$c.out" | awk '{print $1}') \
    | awk '{ok += ($1 == $2)} END {printf "%.4f", ok / NR}')
  printf 'liblinear -c %-4s validation AUC %s, accuracy %s; %.1f s training\n' "$c" "$auc" \
    "$accuracy" "$seconds"
done
