#!/usr/bin/env bash
# Two keel binaries side by side (for example before and after a change):
# alternating rounds of `keel bench kv` (1 server, 1 worker) and of one
# training epoch of the linear learner (1 server, 1 worker,
# configs/linear_learner.flags) on `keel datagen` data; prints each case's
# median over the rounds for both binaries and their ratio (after / before).
#
#   scripts/bench/compare.sh BEFORE_KEEL AFTER_KEEL [ROUNDS] [ROWS]
set -euo pipefail
cd "$(dirname "$0")/../.."
before="${1:?the keel binary before}"
after="${2:?the keel binary after}"
rounds="${3:-3}"
rows="${4:-200000}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-compare}"
mkdir -p "$work"
[ -f "$work/data/oracle.json" ] || "$after" datagen --model=linear --rows="$rows" \
  --features=100000 --nnz=20 --seed=11 --out="$work/data" >/dev/null

# One JSON-ish line per measurement: "<label> <case> <value>".
bench_kv() {  # label binary round
  local out="$work/kv-$1-$3.txt"
  "$2" bench kv --servers=1 --workers=1 --mode=all --bench_seconds=2 --minloglevel=1 \
    > "$out" 2>&1
  # The JSON line: small cases in requests/s, dense in GB/s, sparse in M keys/s; p50 for all.
  grep '^{"bench":"kv"' "$out" | python3 -c '
import json, sys
run = json.load(sys.stdin)
for case in run["cases"]:
    name = case["name"].replace(" ", "_")
    if name.startswith("small"):
        value, unit = case["requests"] / run["seconds_per_case"], "req_per_s"
    elif name.startswith("dense"):
        value, unit = case["gb_per_s"], "gb_per_s"
    else:
        value, unit = case["mkeys_per_s"], "mkeys_per_s"
    print(sys.argv[1], name + "_" + unit, "%.4g" % value)
    print(sys.argv[1], name + "_p50_us", "%.4g" % case["p50_us"])
' "$1"
}

train_epoch() {  # label binary round
  local model="$work/model-$1-$3" start end
  rm -rf "$model"
  start=$(date +%s.%N)
  "$2" launch --servers=1 --workers=1 --flagfile=configs/linear_learner.flags --epochs=1 \
    --train="$work/data/train" --validation="$work/data/validation" --model_dir="$model" \
    --minloglevel=1 > "$work/train-$1-$3.txt" 2>&1
  end=$(date +%s.%N)
  echo "$1 epoch_wall_s $(echo "$end - $start" | bc)"
  echo "$1 examples_per_s $(grep -o '"train:examples_per_second": [0-9.e+]*' "$model/metrics.json" | awk '{print $2}')"
  echo "$1 validation_auc $(grep -o '"validation:roc_auc_score": [0-9.e+-]*' "$model/metrics.json" | awk '{print $2}')"
}

results="$work/results.txt"
: > "$results"
for round in $(seq 1 "$rounds"); do
  for side in before after; do
    binary=$before; [ "$side" = after ] && binary=$after
    bench_kv "$side" "$binary" "$round" >> "$results"
    train_epoch "$side" "$binary" "$round" >> "$results"
  done
  echo "round $round of $rounds done" >&2
done

# Medians per case and side, and after / before.
awk '{ values[$2 " " $1] = values[$2 " " $1] " " $3; cases[$2] = 1 }
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    printf "%-34s %14s %14s %8s\n", "case (median of rounds)", "before", "after", "ratio"
    for (c in cases) {
      b = median(values[c " before"]); a = median(values[c " after"])
      printf "%-34s %14s %14s %8.3f\n", c, b, a, (b + 0 != 0) ? a / b : 0
    }
  }' "$results" | sort
