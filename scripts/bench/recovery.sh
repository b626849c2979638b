#!/usr/bin/env bash
# Recovery from a failed replicated server: the linear learner on `keel
# datagen` data, 2 servers (--replication=1: each key range on both) and 2
# workers started one by one on 127.0.0.1. In each run, 0.5 s after the
# leading worker's first epoch line (inside epoch 2, which takes 2-4 s), server 1 is
#   kill   killed with -9 (its connections close: the scheduler probes its
#          address, which refuses, and removes it at once), or
#   stop   stopped with SIGSTOP (its connections stay open: heartbeats find it,
#          at the heartbeat timeout);
# server 0 is promoted to primary of server 1's range and the workers resend
# to it. Recovery is the time from the signal (the script's clock just before
# `kill`) to server 0's log line `key range 1: first push served since this
# server became its primary`; detection, to the scheduler's membership-log
# `leave` line. Every role is killed by PID after each run. Prints, per kind,
# each run's figures and their median and worst; figures go to
# docs/BENCHMARKS.md ("Recovery from a failed server").
#
#   scripts/bench/recovery.sh [KILLS] [STOPS]   (HEARTBEAT_TIMEOUT, default 2 s;
#                                                ROWS, FEATURES override the data;
#                                                KEEP=1 keeps the runs' logs)
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
kills="${1:-10}"
stops="${2:-10}"
hb_timeout="${HEARTBEAT_TIMEOUT:-2}"
hb_interval=0.2
rows="${ROWS:-400000}"
features="${FEATURES:-40000}"
keel=$(keel_binary --absolute KEEL)
work="$(mktemp -d /tmp/keel-bench-recovery-XXXXXX)"

# Every process this script starts is killed on the way out (a stopped one continued first).
remove_work() {
  if [ -n "${KEEP:-}" ]; then echo "logs: $work" >&2; else rm -rf "$work"; fi
}
track_processes --cont remove_work

data="$work/data"
$keel datagen --model=linear --rows="$rows" --features="$features" --nnz=20 --seed=5 \
  --out="$data" >/dev/null

# run_one KIND N: one run; appends "KIND recovery detection reason" to $work/results.
run_one() {
  local kind=$1 run="$work/$1-$2" pids=()
  mkdir -p "$run"
  local job=(--flagfile=configs/linear_learner.flags --train="$data/train"
    --validation="$data/validation" --epochs=100 --early_stopping_patience=1000
    --heartbeat_interval="$hb_interval" --bind=127.0.0.1)
  start_replicated_pair "$run" "$hb_timeout" "$hb_interval" "${job[@]}" || return 1
  local outcome=ok t_signal="" recovered="" left=""
  if wait_for 120 "$run/worker0.log" '^epoch 1: '; then
    sleep 0.5
    t_signal=$(now)
    # shellcheck disable=SC2154 # pid_server1: set by start (eval)
    if [ "$kind" = kill ]; then kill -9 "$pid_server1"; else kill -STOP "$pid_server1"; fi
    wait_for 30 "$run/server0.log" 'first push served since this server became' \
      || outcome="no push served by server 0 within 30 s"
    recovered=$(glog_time "$run/server0.log" 'first push served since this server became')
    left=$(grep -m1 '"event": "leave"' "$run/membership.jsonl" 2>/dev/null \
      | grep -oE '"time": [0-9.]+' | awk '{ print $2 }' || true)
  else
    outcome="no epoch 1 within 120 s"
  fi
  local reason
  reason=$(grep -m1 '"event": "leave"' "$run/membership.jsonl" 2>/dev/null \
    | grep -oE '"reason": "[^"]*"' | sed 's/"reason": //' || true)
  kill_pids --cont "${pids[@]}"
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$outcome" != ok ] || [ -z "$recovered" ]; then
    echo "$kind run $2: $outcome" >&2
    return 0
  fi
  local recovery detection
  recovery=$(echo "$recovered - $t_signal" | bc)
  detection=$( [ -n "$left" ] && echo "$left - $t_signal" | bc || echo "")
  printf '%s %.3f %.3f %s\n' "$kind" "$recovery" "${detection:-0}" "${reason:-?}" >> "$work/results"
  printf '%s run %d: recovery %.3f s, detection %.3f s, %s\n' "$kind" "$2" "$recovery" \
    "${detection:-0}" "${reason:-?}" >&2
}

for ((i = 1; i <= kills; ++i)); do run_one kill "$i"; done
for ((i = 1; i <= stops; ++i)); do run_one stop "$i"; done

echo "2 servers (--replication=1), 2 workers, linear learner on $rows x $features datagen data;"
echo "--heartbeat_interval=$hb_interval, scheduler --heartbeat_timeout=$hb_timeout; server 1 signalled"
echo "0.5 s after the leading worker's first epoch line. Seconds from the signal."
echo
echo "| server 1 | runs | recovery median | recovery worst | detection median | detection worst | leave reasons |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for kind in kill stop; do
  grep "^$kind " "$work/results" 2>/dev/null | python3 -c '
import statistics, sys
kind = sys.argv[1]
rows = [line.split(" ", 3) for line in sys.stdin.read().splitlines()]
if not rows:
    sys.exit(0)
recovery = [float(r[1]) for r in rows]
detection = [float(r[2]) for r in rows]
reasons = {}
for r in rows:
    key = r[3].strip("\"").split(" for ")[0].split(" and ")[0]
    reasons[key] = reasons.get(key, 0) + 1
label = {"kill": "kill -9", "stop": "SIGSTOP"}[kind]
print(f"| {label} | {len(rows)} | {statistics.median(recovery):.3f} | {max(recovery):.3f} | "
      f"{statistics.median(detection):.3f} | {max(detection):.3f} | "
      + ", ".join(f"{n}x {k}" for k, n in reasons.items()) + " |")
' "$kind"
done
