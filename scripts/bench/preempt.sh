#!/usr/bin/env bash
# Preemption benchmark: a launched linear learner (2 servers, 2 workers,
# --checkpoint_uri) gets a preemption notice (`--faults=preempt:worker:0@AT`,
# a SIGTERM) RUNS times. Per run it records
#   - notice -> committed checkpoint: the scheduler's "(N s after the notice)";
#   - notice -> every process gone: the launcher's exit, from the fault log's
#     "preempt" event to the launcher's "end";
#   - work lost: examples the workers pushed beyond the checkpoint's cursors
#     (their "stops for the preemption checkpoint" lines against the manifest),
#     and, after `--resume=latest`, examples of the preempted epoch read again
#     (that epoch's examples in history.jsonl minus the training channel's rows).
# and prints the median of each. Figures go to docs/BENCHMARKS.md ("Preemption").
#
#   scripts/bench/preempt.sh [RUNS] [AT]
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
runs="${1:-5}"
at="${2:-5s}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-preempt}"
keel=$(keel_binary KEEL)

[ -d "$work/data/train" ] || $keel datagen --model=linear --rows=100000 --features=20000 \
  --nnz=20 --seed=5 --out="$work/data" >/dev/null
rows=$(cat "$work"/data/train/* | wc -l)

job=(--servers=2 --workers=2 --job=linear_learner --train="$work/data/train"
  --validation="$work/data/validation" --epochs=10 --mini_batch_size=100 --minloglevel=1
  --early_stopping_patience=100)

commit_s=() exit_s=() pushed_beyond=() reread=()
for ((run = 0; run < runs; ++run)); do
  rm -rf "$work/ckpt" "$work/model" "$work/events.jsonl"
  set +e
  out=$($keel launch "${job[@]}" --model_dir="$work/model" --checkpoint_uri="file://$work/ckpt" \
    --faults="preempt:worker:0@$at" --event_log="$work/events.jsonl" 2>&1)
  code=$?
  set -e
  if [ "$code" != 75 ]; then
    echo "run $run: exit status $code, not 75" >&2
    echo "$out" | tail -20 >&2
    exit 1
  fi
  id=$(echo "$out" | grep -o 'checkpoint ckpt-[0-9-]* committed' | head -1 | awk '{print $2}')
  commit_s+=("$(echo "$out" | grep -o '([0-9.]* s after the notice)' | head -1 | tr -d '(' | awk '{print $1}')")
  exit_s+=("$(python3 - "$work/events.jsonl" <<'PY'
import json, sys
events = [json.loads(line) for line in open(sys.argv[1])]
notice = next(e["t"] for e in events if e["event"] == "preempt")
end = next(e["t"] for e in events if e["event"] == "end")
print(f"{end - notice:.2f}")
PY
)")
  manifest=$($keel checkpoint show "file://$work/ckpt/$id")
  pushed_beyond+=("$(python3 - "$manifest" "$out" <<'PY'
import json, re, sys
manifest = json.loads(sys.argv[1])
held = {w.get("rank", 0): int(w.get("batches", 0)) for w in manifest.get("workers", [])}
stopped = {int(r): int(b) for r, e, b in
           re.findall(r"worker (\d+) stops for the preemption checkpoint at epoch (\d+) minibatch (\d+)", sys.argv[2])}
print(sum(max(0, b - held.get(r, 0)) for r, b in stopped.items()))
PY
)")
  $keel launch "${job[@]}" --model_dir="$work/model" --checkpoint_uri="file://$work/ckpt" \
    --resume=latest >/dev/null 2>&1
  epoch=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["epoch"])' "$manifest")
  # history.jsonl: the preempted run's epochs, then the resumed run's.
  read_again=$(python3 - "$work/model/history.jsonl" "$epoch" <<'PY'
import json, sys
lines = [json.loads(line) for line in open(sys.argv[1])]
print(sum(l["examples"] for l in lines if l["epoch"] == int(sys.argv[2])))
PY
)
  reread+=("$((read_again - rows))")
  echo "run $run: $id, committed ${commit_s[-1]} s after the notice, launcher gone after" \
    "${exit_s[-1]} s; minibatches pushed beyond the checkpoint ${pushed_beyond[-1]};" \
    "examples of epoch $epoch read again after resume ${reread[-1]}"
done
echo "== $runs runs, notice at $at, 2 servers, 2 workers, minibatches of 100 ($rows rows per epoch)"
echo "notice -> committed checkpoint: median $(printf '%s\n' "${commit_s[@]}" | median) s"
echo "notice -> launcher exit:        median $(printf '%s\n' "${exit_s[@]}" | median) s"
echo "minibatches pushed beyond the checkpoint: median $(printf '%s\n' "${pushed_beyond[@]}" | median)"
echo "examples read again after resume:        median $(printf '%s\n' "${reread[@]}" | median)"
