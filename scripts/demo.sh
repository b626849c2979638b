#!/usr/bin/env bash
# The embedded default job: synthetic data from a planted model, a linear
# learner trained on a local cluster (a scheduler, 2 servers and 2 workers as
# local processes on loopback, checkpoints and model in a local folder), its
# validation metrics beside the planted model's, and the test file scored with
# `keel predict`. Extra arguments go to `keel launch`.
#
# It installs only what building and running keel needs and builds only the
# keel binary (scripts/setup.sh); scripts/test.sh adds the rest in the same
# tree without rebuilding what this built. Each step prints a line when it
# starts and its time when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/steps.sh
KEEL_SETUP_QUIET=${KEEL_SETUP_QUIET:-1} scripts/setup.sh

work="${KEEL_DEMO_DIR:-/tmp/keel-demo}"
rows="${KEEL_DEMO_ROWS:-200000}"
features="${KEEL_DEMO_FEATURES:-20000}"
mkdir -p "$work"
if [ ! -f "$work/data/oracle.json" ]; then
  step "generating $rows rows of $features features from a planted model in $work/data"
  build/keel datagen --model=linear --rows="$rows" --features="$features" --nnz=20 --seed=1 \
    --out="$work/data"
  step_done
fi

# Each run is a new job: the checkpoints of the run before are its own, and a
# new job refuses a folder holding another job's (--resume=latest goes on).
if [ -d "$work/checkpoints" ]; then
  echo "removing the previous run's checkpoints in $work/checkpoints"
  rm -rf "$work/checkpoints"
fi
step "training a linear learner on 2 servers and 2 workers (local processes)"
build/keel launch --servers=2 --workers=2 --flagfile=configs/linear_learner.flags \
  --train="$work/data/train" --validation="$work/data/validation" --test="$work/data/test" \
  --model_dir="$work/model" --checkpoint_uri="file://$work/checkpoints" --keep_checkpoints=3 \
  --minloglevel=1 "$@"
step_done

echo
echo "validation metrics: learned vs planted (the best any learner can do)"
for metric in roc_auc_score objective_loss binary_classification_accuracy; do
  learned=$(grep -o "\"validation:$metric\": [-0-9.e]*" "$work/model/metrics.json" | awk '{print $2}')
  oracle=$(grep -o "\"validation:$metric\": [-0-9.e]*" "$work/data/oracle.json" | awk '{print $2}')
  printf '  %-32s %10.4f %10.4f\n' "$metric" "$learned" "$oracle"
done
echo
echo "checkpoints (resume a job with --resume=latest):"
build/keel checkpoint ls "file://$work/checkpoints"
echo
step "scoring the test file with keel predict"
build/keel predict --model_dir="$work/model" --data="$work/data/test" \
  --out="$work/predictions.csv"
step_done
