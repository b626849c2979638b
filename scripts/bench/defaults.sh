#!/usr/bin/env bash
# Good models without tuning: Keel's default settings against the issue's
# targets, every figure in one run. Each Keel run gives no hyperparameter but
# --job, --predictor_type, --feature_dim (and --num_classes, which multiclass
# requires), the data channels, --model_dir and the cluster size (2 servers,
# 2 workers); the two exceptions are said where they run (the cost of models:
# --num_models and --epochs=1; the workers: their counts, 4 servers,
# --staleness=0). Data: `keel datagen`, seed 11, 20 non-zeros a row,
# validation and test a tenth of the training rows each.
#
# Prints one table row per figure (figure, value, the issue's target, met or
# not) and writes the table to WORK/summary.txt; logs and models stay in WORK.
# Not a timed test: model quality is measured, and the two timed figures
# (LIBLINEAR, the cost of models) are measured side by side in the same run.
#
#   scripts/bench/defaults.sh [ROWS] [FEATURES]     # defaults 1000000 100000
#   e.g. scripts/bench/defaults.sh 20000 2000       # a quick check
#   KEEL_BENCH_DIR (default /tmp/keel-bench-defaults), KEEL (default build/keel)
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
rows="${1:-1000000}"
features="${2:-100000}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-defaults}"
keel=$(keel_binary KEEL)
worker_rows=$((rows < 200000 ? rows : 200000)) # the workers' figure's set
data="$work/data-$rows-$features"
summary="$work/summary.txt"
mkdir -p "$work" "$data"
command -v liblinear-train >/dev/null 2>&1 || {
  echo "defaults.sh: liblinear-train not found; run scripts/setup.sh (liblinear-tools)" >&2
  exit 1
}
[ -x "$keel" ] || { echo "defaults.sh: $keel is not an executable; build first" >&2; exit 1; }

# json FILE KEY: KEY's value in a flat JSON object, "-" when absent.
json() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], "-"))' "$1" "$2" \
    2>/dev/null || echo -
}
# calc EXPRESSION: a number with 4 decimals, "-" when an input is missing.
calc() { python3 -c "print('%.4f' % ($1))" 2>/dev/null || echo -; }
# verdict CONDITION: "met" or "NOT met" ("-" when an input is missing).
verdict() { python3 -c "print('met' if ($1) else 'NOT met')" 2>/dev/null || echo -; }

rowf() { printf '%-50s | %-44s | %-32s | %s\n' "$@" | tee -a "$summary"; }

datagen() {  # folder [datagen flags]
  local out=$1; shift
  cached_datagen "$out" --rows="$rows" --features="$features" --nnz=20 --seed=11 "$@"
}

# run_keel LABEL DATA SERVERS WORKERS [flags]: a job on DATA's channels, its
# model in WORK/model-LABEL, its log in WORK/log-LABEL.txt; prints nothing,
# records the wall seconds in WORK/model-LABEL.seconds. A failed run leaves
# no metrics.json, and every figure that needs it reads "-".
run_keel() {
  local label=$1 set=$2 servers=$3 workers=$4; shift 4
  local dir="$work/model-$label" start
  rm -rf "$dir"
  start=$(now_ns)
  if ! $keel launch --servers="$servers" --workers="$workers" --feature_dim="$features" \
    --train="$set/train" --validation="$set/validation" --test="$set/test" \
    --model_dir="$dir" "$@" > "$work/log-$label.txt" 2>&1; then
    echo "defaults.sh: run $label failed; see $work/log-$label.txt" >&2
  fi
  echo "$(now_ns) - $start" | bc > "$work/model-$label.seconds"
  echo "  $label: $(calc "$(cat "$work/model-$label.seconds")") s" >&2
}
metric() { json "$work/model-$1/metrics.json" "$2"; }

# LIBLINEAR (-s 0: L2-regularized logistic regression, primal) at cost C on
# the linear set: prints "AUC SECONDS" (validation AUC, training wall time).
liblinear() {
  local c=$1 validation="$data/linear/validation/part-0.libsvm" seconds auc
  seconds=$(liblinear_fit "$c" "$work/linear-train.libsvm" "$work/liblinear-$c.model")
  auc=$(liblinear_auc "$validation" "$work/liblinear-$c.model" "$work/liblinear-$c.out")
  echo "$auc $(calc "$seconds")"
}

# The first epoch of LABEL's history whose validation AUC reaches TARGET:
# prints "EPOCH SECONDS" (seconds since the job started), or "- -".
first_reaching() {
  python3 - "$work/model-$1/history.jsonl" "$2" <<'EOF' 2>/dev/null || echo "- -"
import json, sys
for line in open(sys.argv[1]):
    epoch = json.loads(line)
    if epoch.get("validation:roc_auc_score", 0) >= float(sys.argv[2]):
        print(epoch["epoch"], "%.1f" % epoch["seconds"])
        break
else:
    print("- -")
EOF
}

echo "== data: $rows training rows, $features features, 20 non-zeros a row, seed 11 ($data)" >&2
datagen "$data/linear" --model=linear
datagen "$data/fm" --model=fm --num_factors=4
datagen "$data/regression" --model=linear --predictor_type=regressor --label_offset=150 \
  --label_scale=60
datagen "$data/multiclass" --model=linear --predictor_type=multiclass_classifier --num_classes=10
datagen "$data/spread" --model=linear --feature_scale_spread=4
workers_set="$data/linear"
if [ "$worker_rows" -ne "$rows" ]; then
  workers_set="$work/data-$worker_rows-$features/linear"
  cached_datagen "$workers_set" --rows="$worker_rows" --features="$features" --nnz=20 --seed=11 \
    --model=linear
fi
# The standardized copy of the spread set: every feature divided by its scale
# leaves every value 1, which is the linear set (same seed, spread 0; datagen's
# spread changes only the written values). Checked here: same labels and
# indices, line for line.
if cmp -s <(cat "$data/spread"/train/* | sed 's/:[^ ]*//g') \
    <(cat "$data/linear"/train/* | sed 's/:[^ ]*//g'); then
  standardized_same=yes
else
  standardized_same=no
fi

echo "== keel runs (2 servers, 2 workers unless said)" >&2
binary=(--predictor_type=binary_classifier)
run_keel linear "$data/linear" 2 2 --job=linear_learner "${binary[@]}"
run_keel fm "$data/fm" 2 2 --job=factorization_machines "${binary[@]}"
run_keel regression "$data/regression" 2 2 --job=linear_learner --predictor_type=regressor
run_keel multiclass "$data/multiclass" 2 2 --job=linear_learner \
  --predictor_type=multiclass_classifier --num_classes=10
run_keel spread "$data/spread" 2 2 --job=linear_learner "${binary[@]}"

echo "== LIBLINEAR -s 0, -c 0.1 and 1 (one thread) on the linear set" >&2
cat "$data/linear"/train/* > "$work/linear-train.libsvm"
read -r ll_auc_01 ll_s_01 < <(liblinear 0.1)
read -r ll_auc_1 ll_s_1 < <(liblinear 1)
if python3 -c "import sys; sys.exit(0 if $ll_auc_01 >= $ll_auc_1 else 1)"; then
  ll_best_c=0.1 ll_best_auc=$ll_auc_01 ll_best_s=$ll_s_01
else
  ll_best_c=1 ll_best_auc=$ll_auc_1 ll_best_s=$ll_s_1
fi
read -r reach_epoch reach_s < <(first_reaching linear "$ll_best_auc")

echo "== cost of models: --num_models=1, 8, 32 with --epochs=1 (linear set)" >&2
for n in 1 8 32; do
  run_keel models-$n "$data/linear" 2 2 --job=linear_learner "${binary[@]}" --num_models=$n \
    --epochs=1
done

echo "== workers: 4 servers, 2/8/16 workers, asynchronous and --staleness=0 ($worker_rows rows)" >&2
for w in 2 8 16; do
  run_keel workers-$w-async "$workers_set" 4 "$w" --job=linear_learner "${binary[@]}"
  run_keel workers-$w-sync "$workers_set" 4 "$w" --job=linear_learner "${binary[@]}" --staleness=0
done

oracle() { json "$data/$1/oracle.json" "$2"; }
auc=validation:roc_auc_score
: > "$summary"
{
  echo "Keel defaults benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "data: $rows training rows, $features features, 20 nnz, seed 11; validation = test = $((rows / 10)) rows"
} | tee -a "$summary"
rowf "figure" "value" "target (issue 14)" "met"
rowf "----" "----" "----" "----"
for set in linear fm; do
  gap=$(calc "$(oracle $set $auc) - $(metric $set $auc)")
  limit=$([ $set = linear ] && echo 0.006 || echo 0.018)
  rowf "1/2. $set: validation AUC (oracle)" "$(calc "$(metric $set $auc)") ($(calc "$(oracle $set $auc)")), gap $gap" \
    "gap <= $limit" "$(verdict "$gap <= $limit")"
  rowf "     $set: test AUC (oracle)" \
    "$(calc "$(metric $set test:roc_auc_score)") ($(calc "$(oracle $set test:roc_auc_score)"))" \
    "(shown, no target)" ""
done
mse=$(metric regression validation:mse)
omse=$(oracle regression validation:mse)
rowf "3. regression: validation MSE (oracle)" "$(calc "$mse") ($(calc "$omse")), +$(calc "100 * ($mse / $omse - 1)")%" \
  "within 2% of the oracle's" "$(verdict "$mse <= 1.02 * $omse")"
acc=validation:multiclass_accuracy
gap=$(calc "$(oracle multiclass $acc) - $(metric multiclass $acc)")
rowf "4. multiclass (10): validation accuracy (oracle)" \
  "$(calc "$(metric multiclass $acc)") ($(calc "$(oracle multiclass $acc)")), gap $gap" \
  "gap <= 0.01" "$(verdict "$gap <= 0.01")"
difference=$(calc "abs($(metric spread $auc) - $(metric linear $auc))")
rowf "5. spread 4 decades vs standardized: AUC" \
  "$(calc "$(metric spread $auc)") vs $(calc "$(metric linear $auc)"), diff $difference" \
  "diff <= 0.005" "$(verdict "$difference <= 0.005")"
rowf "     (standardized = the linear set, checked)" "same labels and indices: $standardized_same" "" ""
rowf "6. LIBLINEAR -c 0.1 / -c 1: validation AUC, seconds" "$ll_auc_01, $ll_s_01 s / $ll_auc_1, $ll_s_1 s" "(best: -c $ll_best_c)" ""
rowf "   Keel defaults reach $ll_best_auc after" "epoch $reach_epoch, $reach_s s (run: $(calc "$(cat "$work/model-linear.seconds")") s)" \
  "sooner than LIBLINEAR's $ll_best_s s" "$(verdict "$reach_s < $ll_best_s")"
eps1=$(metric models-1 train:examples_per_second)
for n in 1 8 32; do
  eps=$(metric models-$n train:examples_per_second)
  rowf "7. num_models=$n, --epochs=1: examples/s" "$(calc "$eps" | cut -d. -f1), cost x$(calc "$eps1 / $eps")" \
    "$([ $n = 32 ] && echo "32 models cost <= 3x one")" \
    "$([ $n = 32 ] && verdict "$eps1 / $eps <= 3")"
done
for w in 2 8 16; do
  async=$(metric workers-$w-async validation:objective_loss)
  sync=$(metric workers-$w-sync validation:objective_loss)
  rowf "8. $w workers, 4 servers ($worker_rows rows): log loss" \
    "$(calc "$async") async / $(calc "$sync") sync = $(calc "$async / $sync")" \
    "ratio <= 1.01" "$(verdict "$async / $sync <= 1.01")"
done
echo "written to $summary" >&2
