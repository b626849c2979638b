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
cd "$(dirname "$0")/../.."
rounds="${1:-3}"
epochs="${2:-1}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-train}"
keel=build/keel
data="$work/linear"
command -v liblinear-train >/dev/null 2>&1 || {
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y -q liblinear-tools >/dev/null
}
[ -f "$data/oracle.json" ] || $keel datagen --model=linear --rows=1000000 --features=100000 \
  --nnz=20 --num_factors=4 --seed=11 --out="$data" >/dev/null
[ -f "$work/linear-train.libsvm" ] || cat "$data"/train/* > "$work/linear-train.libsvm"

now() { date +%s.%N; }
seconds() { echo "$2 - $1" | bc; }

# LIBLINEAR's validation AUC for the model in $1.
liblinear_auc() {
  liblinear-predict -b 1 "$data/validation/part-0.libsvm" "$1" "$1.out" >/dev/null
  # Output: a header "labels 1 0" (or "0 1"), then "predicted p(first) p(second)".
  local column
  column=$(head -1 "$1.out" | awk '{print ($2 == 1) ? 2 : 3}')
  paste -d' ' <(cut -d' ' -f1 "$data/validation/part-0.libsvm") \
      <(tail -n +2 "$1.out" | awk -v c="$column" '{print $c}') \
    | sort -g -k2 | awk -f scripts/bench/auc.awk
}

liblinear() {  # $1: C
  local start end
  start=$(now)
  liblinear-train -q -s 0 -c "$1" "$work/linear-train.libsvm" "$work/liblinear-$1.model"
  end=$(now)
  printf 'liblinear -c %-4s %.2f s, validation AUC %s\n' "$1" "$(seconds "$start" "$end")" \
    "$(liblinear_auc "$work/liblinear-$1.model")"
}

keel_job() {  # $1: the keel binary, $2: a name
  local start end model="$work/liblinear-time-model"
  rm -rf "$model"
  start=$(now)
  "$1" launch --servers=1 --workers=1 --flagfile=configs/linear_learner.flags \
    --train="$data/train" --validation="$data/validation" --epochs="$epochs" \
    --model_dir="$model" --minloglevel=1 > "$work/liblinear-time-keel.log" 2>&1
  end=$(now)
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
