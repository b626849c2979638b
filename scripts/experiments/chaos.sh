#!/usr/bin/env bash
# Chaos experiment: N random fault schedules, each run with the exact_sum job
# (every key's sum checked against the workers' ledgers) and then with a
# training job (the linear learner on `keel datagen` data), under
# `keel launch --faults=...`.
#
#   scripts/experiments/chaos.sh N SEED
#
# Run i uses schedule SEED + i (scripts/experiments/chaos.py schedule: 2-3
# servers, 2 workers, 3-8 kill/stop/restart items on servers, workers and,
# when the launcher supports it, the scheduler, plus drops, delays and, as
# root, partitions; servers down one at a time). `chaos.sh 1 S` replays schedule S: the same faults at
# the same times (not the same interleaving). Each run prints its seed, its
# schedule and its replay command before it starts.
#
# Writes to OUT (default /tmp/keel-chaos-SEED): runs/seed-S/ (each job's
# terminal output, event log and model folder), results.jsonl (one line per
# job), chaos.md (the table) and chaos.svg (each job's faults on its time
# line). The first failing schedule's folder is copied to
# OUT/failing-seed-S/. Ctrl-C stops the running launch (by its PID) and ends
# the experiment after writing the table of what finished.
#
# Environment:
#   REPLICATION  backups per key range (default 1). 0: runs without
#                replication; the training job then checkpoints
#                (--checkpoint_every=CKPT_EVERY) and a killed server's range is
#                restored from the latest checkpoint; exact_sum takes no
#                checkpoints, so the ranges of the servers a schedule killed,
#                restarted or stopped start over empty: their lost keys are the
#                allowed loss, counted, and any other wrong sum is a violation
#   WINDOW       faults fall in [2 s, WINDOW s] after the launch (default 15)
#   ROWS, FEATURES, EPOCHS   training data and epochs (default 200000, 20000, 16: the
#                training job then lasts about as long as the fault window)
#   SUM_EPOCHS, SUM_MINIBATCHES   exact_sum's --epochs and --exact_sum_minibatches
#                (default 16 and 3000)
#   HB_TIMEOUT   scheduler --heartbeat_timeout (default 2; heartbeats every 0.25 s)
#   JOB_TIMEOUT  keel launch --timeout for each job (default 200 s)
#   CKPT_EVERY   REPLICATION=0 training: minibatches per worker between checkpoints (default 100)
#   SCHEDULER    1: include scheduler faults, stop: only stops of the scheduler
#                (no kill or restart), 0: none (default: 1 when the fault grammar
#                takes `scheduler`)
#   PARTITIONS   1: include partitions (one process cut from the others), 0: not
#                (default: 1 when running as root and the launcher takes them)
#   MODE         mixed (default) or chain: two overlapping faults aimed at the
#                servers of one key range's chain (see chaos.py), REPLICATION >= 1
#   JOBS         the jobs each schedule runs (default "exact_sum train")
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
[ $# -eq 2 ] || { sed -n '2,47p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
count=$1 seed0=$2
[[ "$count" =~ ^[0-9]+$ && "$seed0" =~ ^[0-9]+$ ]] || { echo "chaos.sh: N and SEED are integers" >&2; exit 2; }
replication="${REPLICATION:-1}"
window="${WINDOW:-15}"
rows="${ROWS:-200000}"
features="${FEATURES:-20000}"
epochs="${EPOCHS:-16}"
sum_epochs="${SUM_EPOCHS:-16}"
sum_minibatches="${SUM_MINIBATCHES:-3000}"
hb_timeout="${HB_TIMEOUT:-2}"
job_timeout="${JOB_TIMEOUT:-200}"
ckpt_every="${CKPT_EVERY:-100}"
mode="${MODE:-mixed}"
jobs="${JOBS:-exact_sum train}"
out="${OUT:-/tmp/keel-chaos-$seed0}"
chaos="$PWD/scripts/experiments/chaos.py"
mkdir -p "$out/runs"
# A copy of the binary: a rebuild during the experiment does not change it.
keel="$out/keel"
cp "$(keel_binary)" "$keel"
if [ -z "${SCHEDULER:-}" ]; then
  SCHEDULER=0
  "$keel" launch --servers=1 --workers=1 --job=exact_sum --faults='kill:scheduler@1s' --check_flags \
    >/dev/null 2>&1 && SCHEDULER=1
fi
if [ -z "${PARTITIONS:-}" ]; then
  PARTITIONS=0
  "$keel" launch --servers=1 --workers=1 --job=exact_sum --check_flags \
    --faults='partition:server:0|worker:0@1s+1s' >/dev/null 2>&1 && PARTITIONS=1
fi
data="$out/data-$rows-$features"
if [[ " $jobs " == *" train "* ]]; then
  cached_datagen "$data" --model=linear --rows="$rows" --features="$features" --nnz=20 --seed=5
fi

launch_pid=""
stop() {
  if [ -n "$launch_pid" ]; then
    echo "chaos.sh: interrupted; stopping keel launch (pid $launch_pid)" >&2
    kill -TERM "$launch_pid" 2>/dev/null || true
    wait "$launch_pid" 2>/dev/null || true
  fi
  python3 "$chaos" report "$out" || true
  exit 130
}
trap stop INT TERM

# The environment that shapes a run, for its replay command.
settings="REPLICATION=$replication WINDOW=$window ROWS=$rows FEATURES=$features EPOCHS=$epochs"
settings+=" SUM_EPOCHS=$sum_epochs SUM_MINIBATCHES=$sum_minibatches HB_TIMEOUT=$hb_timeout"
settings+=" CKPT_EVERY=$ckpt_every SCHEDULER=$SCHEDULER PARTITIONS=$PARTITIONS MODE=$mode"
settings+=" JOBS='$jobs'"

# run_job JOB ARGS...: one keel launch in $run, its PID kept for Ctrl-C;
# writes JOB.log, JOB.code, JOB.wall, JOB.events.jsonl, JOB.model/.
run_job() {
  local job=$1; shift
  local args=(launch --servers="$servers" --workers="$workers" --replication="$replication"
    --faults="$faults" --fault_seed="$seed" --event_log="$run/$job.events.jsonl"
    --model_dir="$run/$job.model" --membership_log="$run/$job.membership.jsonl"
    --heartbeat_interval=0.25 --heartbeat_timeout="$hb_timeout"
    --timeout="$job_timeout" --progress=lines "$@")
  printf '%q ' "$keel" "${args[@]}" >> "$run/commands"; echo >> "$run/commands"
  local t0=$EPOCHREALTIME code=0
  "$keel" "${args[@]}" > "$run/$job.log" 2>&1 &
  launch_pid=$!
  wait "$launch_pid" || code=$?
  launch_pid=""
  echo "$code" > "$run/$job.code"
  echo "$EPOCHREALTIME - $t0" | bc > "$run/$job.wall"
}

failed_saved=""
for ((i = 0; i < count; i++)); do
  seed=$((seed0 + i))
  servers="" workers="" faults="" down=""
  eval "$(python3 "$chaos" schedule "$seed" "$replication" "$window" "$SCHEDULER" "$PARTITIONS" \
    "$mode" "$hb_timeout")"
  run="$out/runs/seed-$seed"
  rm -rf "$run"; mkdir -p "$run"
  replay="$settings scripts/experiments/chaos.sh 1 $seed"
  echo "seed $seed: $servers servers, $workers workers, replication $replication, faults: $faults"
  echo "  replay: $replay"
  printf 'servers=%s\nworkers=%s\nreplication=%s\nfaults=%s\nreplay=%s\n' "$servers" "$workers" \
    "$replication" "$faults" "$replay" > "$run/schedule"
  if [[ " $jobs " == *" exact_sum "* ]]; then
    run_job exact_sum --job=exact_sum --epochs="$sum_epochs" \
      --exact_sum_minibatches="$sum_minibatches"
  fi
  if [[ " $jobs " == *" train "* ]]; then
    train=(--flagfile=configs/linear_learner.flags --train="$data/train"
      --validation="$data/validation" --epochs="$epochs" --early_stopping_patience=1000)
    [ "$replication" = 0 ] && train+=(--checkpoint_uri="file://$run/train.ckpt"
      --checkpoint_every="$ckpt_every")
    run_job train "${train[@]}"
  fi
  verdicts=""
  for job in $jobs; do
    line=$(python3 "$chaos" outcome "$run" "$job" "$replication" "$down" "$seed" "$servers" \
      "$faults" "$replay")
    echo "$line" >> "$out/results.jsonl"
    verdict=$(echo "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["verdict"])')
    echo "  $job: $verdict, $(cat "$run/$job.wall") s"
    [[ "$verdict" == ok* ]] || verdicts+="$job "
  done
  if [ -n "$verdicts" ] && [ -z "$failed_saved" ]; then
    failed_saved="$out/failing-seed-$seed"
    rm -rf "$failed_saved"; cp -r "$run" "$failed_saved"
    echo "  FAILED ($verdicts): logs in $failed_saved"
  fi
done
python3 "$chaos" report "$out"
echo "table: $out/chaos.md, plot: $out/chaos.svg"
