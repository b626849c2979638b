#!/usr/bin/env bash
# The same training rows read as files and through a pipe (SageMaker's Pipe
# mode), for one or more keel binaries side by side: a linear learner with
# defaults (1 server, 1 worker, 5 epochs) on `keel datagen` data whose dense
# features have offsets and spreads like real data's, the training channel
# given as a folder and as pipe:FIFO fed by cat. Prints each binary's final
# validation AUC for both.
#
#   scripts/bench/pipe_vs_file.sh KEEL [KEEL...]
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 KEEL [KEEL...]" >&2; exit 2; }
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-pipe-vs-file}"
mkdir -p "$work"
[ -f "$work/data/oracle.json" ] || "$1" datagen --model=linear --rows=60000 --features=5000 \
  --nnz=10 --dense_features=5 --seed=3 --train_files=1 --out="$work/data" >/dev/null
flags=(--job=linear_learner --servers=1 --workers=1 --feature_dim=5005 --epochs=5
  --validation="$work/data/validation")
auc() { grep -o 'validation roc_auc_score [0-9.]*' "$1" | tail -1 | awk '{print $3}'; }
for keel in "$@"; do
  "$keel" launch "${flags[@]}" --train="$work/data/train" >"$work/file.log" 2>&1
  fifo="$work/train.fifo"
  rm -f "$fifo" && mkfifo "$fifo"
  cat "$work/data/train/part-0.libsvm" >"$fifo" &
  writer=$!
  "$keel" launch "${flags[@]}" --train="pipe:$fifo" --data_format=libsvm >"$work/pipe.log" 2>&1
  kill "$writer" 2>/dev/null || true
  wait "$writer" 2>/dev/null || true
  echo "$keel: files $(auc "$work/file.log"), pipe $(auc "$work/pipe.log")"
done
