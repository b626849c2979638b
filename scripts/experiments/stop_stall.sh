#!/usr/bin/env bash
# Stall hunt around a stopped replicated server: scripts/bench/recovery.sh's
# job (the linear learner on `keel datagen` data, 2 servers with
# --replication=1, 2 workers on 127.0.0.1, heartbeats every 0.2 s, timeout 2 s)
# with server 1 stopped (SIGSTOP) DELAY s after the leading worker's line
# matching TRIGGER (default `epoch 1:`), DELAY taken in turn from DELAYS. A run
# stalls when, within STALL s (30) of the stop, server 0 has not served a push
# as the promoted primary of server 1's range or either worker has not logged
# NEED (1) more `epoch N done` lines. With CONT_AFTER, server 1 is continued
# that many seconds after its stop (it finds itself removed and starts over,
# copying its ranges back): the workers must then log NEED more epochs within
# STALL s of the continuation, and again after its new process registers. On
# a stall: every role's stacks (gdb) go to the run's folder, then server 1 is
# continued. Every role is killed by PID after each run; the folders stay.
# Prints a line per run (per phase: the epochs logged at its start; seconds
# from the stop to the first push served, in the stop's phase; from the
# phase's start to each worker's NEED-th epoch) and the count of stalls.
#
#   scripts/experiments/stop_stall.sh [REPEATS]   (DELAYS, TRIGGER, NEED, STALL,
#                                                   CONT_AFTER, ROWS, FEATURES, KEEL, OUT)
set -uo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
repeats="${1:-1}"
delays="${DELAYS:-0.2 0.4 0.6 0.8 1.0 1.2 1.4}"
trigger="${TRIGGER:-^epoch 1: }"
need="${NEED:-1}"
stall="${STALL:-30}"
rows="${ROWS:-200000}"
features="${FEATURES:-40000}"
keel=$(keel_binary --absolute KEEL)
work="${OUT:-$(mktemp -d /tmp/keel-stop-stall-XXXXXX)}"
mkdir -p "$work"
echo "logs: $work" >&2
track_processes --cont
install_missing gdb gdb
$keel datagen --model=linear --rows="$rows" --features="$features" --nnz=20 --seed=5 \
  --out="$work/data" >/dev/null

epochs() { grep -cE 'worker [0-9]+ epoch [0-9]+ done' "$1" 2>/dev/null || true; }

# progress RUN LABEL FROM [STOPPED]: appends the phase's figures to RUN/result; fails on a
# stall. With STOPPED (the stop's time), server 0's first push served counts too.
progress() {
  local run=$1 label=$2 from=$3 stopped=${4:-} e0 e1 w0="" w1="" served="" t ok=0
  [ -n "$stopped" ] || served=none
  e0=$(epochs "$run/worker0.log")
  e1=$(epochs "$run/worker1.log")
  while :; do
    t=$(now)
    [ -n "$w0" ] || [ "$(epochs "$run/worker0.log")" -lt $((e0 + need)) ] || w0=$t
    [ -n "$w1" ] || [ "$(epochs "$run/worker1.log")" -lt $((e1 + need)) ] || w1=$t
    [ -n "$served" ] || ! file_matches "$run/server0.log" 'first push served since' || served=$t
    if [ -n "$w0" ] && [ -n "$w1" ] && [ -n "$served" ]; then ok=1; break; fi
    [ "$(echo "$t - $from > $stall" | bc)" = 1 ] && break
    sleep 0.1
  done
  [ -z "$stopped" ] || [ -z "$served" ] || served=$(echo "$served - $stopped" | bc)
  printf '%s: epochs %s %s, served %s, worker 0 %s, worker 1 %s; ' "$label" "$e0" "$e1" \
    "$served" "${w0:+$(echo "$w0 - $from" | bc)}" "${w1:+$(echo "$w1 - $from" | bc)}" \
    >> "$run/result"
  [ "$ok" = 1 ]
}

run_one() {
  local run="$work/d$1-$2" pids=() outcome=ok t0 name start_nice=5
  mkdir -p "$run"
  : > "$run/result"
  local job=(--flagfile=configs/linear_learner.flags --train="$work/data/train"
    --validation="$work/data/validation" --epochs=100 --early_stopping_patience=1000
    --heartbeat_interval=0.2 --bind=127.0.0.1)
  start_replicated_pair "$run" 2 0.2 "${job[@]}" || return 1
  if wait_for 120 "$run/worker0.log" "$trigger" 0.01; then
    sleep "$1"
    t0=$(now)
    # shellcheck disable=SC2154 # pid_server1: set by start (eval)
    kill -STOP "$pid_server1"
    if ! progress "$run" stop "$t0" "$t0"; then
      outcome="stall after the stop"
    elif [ -n "${CONT_AFTER:-}" ]; then
      while [ "$(echo "$(now) - $t0 < $CONT_AFTER" | bc)" = 1 ]; do sleep 0.05; done
      kill -CONT "$pid_server1"
      if ! progress "$run" continued "$(now)"; then
        outcome="stall after the continuation"
      elif wait_for "$stall" "$run/membership.jsonl" '"rank": 1, .*"replaces": true'; then
        progress "$run" "started over" "$(now)" || outcome="stall after it started over"
      else
        echo "server 1 did not start over within $stall s; " >> "$run/result"
      fi
    fi
    if [ "$outcome" != ok ]; then
      for name in scheduler server0 server1 worker0 worker1; do
        gdb -p "$(eval echo "\$pid_$name")" -batch -ex 'thread apply all bt' \
          > "$run/$name.stacks" 2>&1
      done
      kill -CONT "$pid_server1"
    fi
  else
    outcome="no epoch line within 120 s"
  fi
  kill_pids --cont "${pids[@]}"
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  echo "delay $1 run $2: $outcome; $(cat "$run/result")" | tee -a "$work/summary"
}

for ((i = 1; i <= repeats; ++i)); do
  for d in $delays; do run_one "$d" "$i"; done
done
echo "$(grep -c ': stall' "$work/summary" || true) stall(s) in $(wc -l < "$work/summary") run(s)"
