#!/usr/bin/env bash
# The default jobs on datagen sets with features like real data's (dense
# measurements with offsets, sparse features of spread scales), in each format,
# beside the same recipe without them, against the planted oracle. Each job as
# defaults.sh runs it: 2 servers, 2 workers, the validation and test channels,
# no hyperparameter but --job, --predictor_type, --feature_dim (and
# --num_classes=10); the data are defaults.sh's recipes (seed 11, 20 non-zeros
# a row, validation and test a tenth of the training rows each), plus, in the
# offsets variants, `--dense_features=DENSE --feature_scale_spread=SPREAD`.
#
# Variants run alternated (every variant of a job, then the next job; ROUNDS
# times), so that the machine's load falls on all of them alike. Prints one
# table row per run (variant, job, validation metric and the oracle's, the gap,
# test metric and the oracle's, wall seconds) and writes the table to
# WORK/summary.txt; logs and models stay in WORK.
#
#   scripts/bench/defaults_offsets.sh [ROWS] [FEATURES]   # defaults 1000000 30000
#   e.g. VARIANTS="plain:libsvm offsets:csv offsets:libsvm offsets:recordio" \
#        scripts/bench/defaults_offsets.sh 300000 500     # CSV: few features only
#   VARIANTS (default "plain:libsvm offsets:libsvm offsets:recordio"): KIND:FORMAT,
#     KIND plain or offsets, FORMAT libsvm, csv or recordio (datagen --data_format)
#   JOBS (default "linear multiclass fm"; also regression), ROUNDS (1),
#   DENSE (10), SPREAD (3), DECADES (datagen's default, 3: the offsets' decades),
#   KEEL_BENCH_DIR (default /tmp/keel-bench-offsets), KEEL (default build/keel)
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
rows="${1:-1000000}"
features="${2:-30000}"
variants="${VARIANTS:-plain:libsvm offsets:libsvm offsets:recordio}"
jobs="${JOBS:-linear multiclass fm}"
rounds="${ROUNDS:-1}"
dense="${DENSE:-10}"
spread="${SPREAD:-3}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-offsets}"
keel=$(keel_binary KEEL)
data="$work/data-$rows-$features"
summary="$work/summary.txt"
mkdir -p "$work" "$data"
[ -x "$keel" ] || { echo "defaults_offsets.sh: $keel is not an executable; build first" >&2; exit 1; }

# json FILE KEY: KEY's value in a flat JSON object, "-" when absent.
json() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], "-"))' "$1" "$2" \
    2>/dev/null || echo -
}
# calc EXPRESSION: a number with 4 decimals, "-" when an input is missing.
calc() { python3 -c "print('%.4f' % ($1))" 2>/dev/null || echo -; }

# The job's datagen flags, keel flags and figure (defaults.sh's recipes).
job_data() {
  case $1 in
    linear) echo --model=linear ;;
    fm) echo --model=fm --num_factors=4 ;;
    regression) echo --model=linear --predictor_type=regressor --label_offset=150 --label_scale=60 ;;
    multiclass) echo --model=linear --predictor_type=multiclass_classifier --num_classes=10 ;;
  esac
}
job_flags() {
  case $1 in
    linear) echo --job=linear_learner --predictor_type=binary_classifier ;;
    fm) echo --job=factorization_machines --predictor_type=binary_classifier ;;
    regression) echo --job=linear_learner --predictor_type=regressor ;;
    multiclass) echo --job=linear_learner --predictor_type=multiclass_classifier --num_classes=10 ;;
  esac
}
job_metric() {
  case $1 in
    linear | fm) echo roc_auc_score ;;
    regression) echo mse ;;
    multiclass) echo multiclass_accuracy ;;
  esac
}

# variant_flags KIND:FORMAT: datagen's flags for the variant.
variant_flags() {
  local kind=${1%%:*} format=${1#*:}
  echo --data_format="$format"
  if [ "$kind" = offsets ]; then
    echo --dense_features="$dense" --feature_scale_spread="$spread"
    [ -z "${DECADES:-}" ] || echo --dense_offset_decades="$DECADES"
  fi
}
variant_dim() { [ "${1%%:*}" = offsets ] && echo $((features + dense)) || echo "$features"; }
set_dir() { echo "$data/${1/:/-}/$2"; }  # VARIANT JOB

echo "== data: $rows training rows, $features features, 20 non-zeros a row, seed 11 ($data)" >&2
for variant in $variants; do
  for job in $jobs; do
    # shellcheck disable=SC2046 # word splitting intended
    cached_datagen "$(set_dir "$variant" "$job")" --rows="$rows" --features="$features" --nnz=20 \
      --seed=11 $(job_data "$job") $(variant_flags "$variant")
  done
done

{
  echo "Keel defaults on offset data, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores"
  echo "data: $rows training rows, $features features, 20 nnz, seed 11; offsets: $dense dense" \
    "features, spread $spread decades${DECADES:+, offsets over $DECADES decades}"
} > "$summary"
rowf() { printf '%-17s | %-10s | %-5s | %-21s | %-8s | %-21s | %s\n' "$@" | tee -a "$summary"; }
rowf variant job round "validation (oracle)" gap "test (oracle)" seconds
rowf ---- ---- ---- ---- ---- ---- ----
for round in $(seq "$rounds"); do
  for job in $jobs; do
    for variant in $variants; do
      set=$(set_dir "$variant" "$job")
      label="${variant/:/-}-$job-$round"
      dir="$work/model-$label"
      rm -rf "$dir"
      start=$(now_ns)
      # shellcheck disable=SC2046 # word splitting intended
      if ! $keel launch --servers=2 --workers=2 --feature_dim="$(variant_dim "$variant")" \
        --train="$set/train" --validation="$set/validation" --test="$set/test" \
        --model_dir="$dir" $(job_flags "$job") > "$work/log-$label.txt" 2>&1; then
        echo "defaults_offsets.sh: run $label failed; see $work/log-$label.txt" >&2
      fi
      seconds=$(python3 -c "print('%.1f' % ($(now_ns) - $start))")
      m=$(job_metric "$job")
      value() { json "$1" "$2:$m"; }
      v=$(value "$dir/metrics.json" validation) ov=$(value "$set/oracle.json" validation)
      t=$(value "$dir/metrics.json" test) ot=$(value "$set/oracle.json" test)
      if [ "$job" = regression ]; then
        gap="+$(python3 -c "print('%.2f' % (100 * ($v / $ov - 1)))" 2>/dev/null || echo -)%"
      else
        gap=$(calc "$ov - $v")
      fi
      rowf "$variant" "$job" "$round" "$(calc "$v") ($(calc "$ov"))" "$gap" \
        "$(calc "$t") ($(calc "$ot"))" "$seconds"
    done
  done
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg); written to $summary" | tee -a "$summary" >&2
