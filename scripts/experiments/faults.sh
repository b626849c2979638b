#!/usr/bin/env bash
# Fault experiment: the linear learner on `keel datagen` data, 2 servers and 2
# workers started one by one (as on a cluster, fixed scheduler port), under
#   baseline   no fault
#   worker     worker 1 killed -9 mid-run, started again with --rank 1 a second later
#   scheduler  the scheduler killed -9 mid-run, started again on the same port a second later
#   drop       1% of every node's outgoing data messages dropped (--drop_rate=0.01 on every role)
#   server     server 1 killed -9 mid-run and started again with --rank 1 (not supported yet:
#              run with a bound, and what happened is recorded)
# For each run: wall time, examples/s, recovery milestones from the roles' glog
# timestamps, the dip in the workers' send rate (sampled from /proc/PID/io), and
# the final validation loss against the baseline's. Writes the table to stdout and
# docs/experiments/faults.md, the plot to docs/experiments/faults.png.
#
#   scripts/experiments/faults.sh      (ROWS, FEATURES, EPOCHS, BATCH, RUNS, SERVER_WAIT override)
set -euo pipefail
cd "$(dirname "$0")/../.."
rows="${ROWS:-600000}"
features="${FEATURES:-60000}"
epochs="${EPOCHS:-8}"
batch="${BATCH:-200}"
runs=(${RUNS:-baseline worker scheduler drop server})
server_wait="${SERVER_WAIT:-60}"  # seconds the server-kill run may go on after the kill
run_timeout=300                   # any other run is stopped after this (and reported)
hb_interval=0.2
hb_timeout=1
work="${KEEL_EXPERIMENT_DIR:-/tmp/keel-faults}"
out=docs/experiments
keel="$PWD/build/keel"
command -v gnuplot >/dev/null 2>&1 || {
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y -q gnuplot-nox >/dev/null
}
mkdir -p "$work" "$out"
data="$work/data-$rows-$features"
[ -f "$data/oracle.json" ] || $keel datagen --model=linear --rows="$rows" \
  --features="$features" --nnz=20 --seed=5 --out="$data" >/dev/null

# Every process this script starts, by PID; all are killed on the way out.
started=()
sampler_pid=""
cleanup() {
  [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null || true
  for p in "${started[@]}"; do kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { echo "$EPOCHREALTIME"; }
# glog stamps are local wall-clock time of day; turn them into Unix seconds.
midnight=$(date -d "$(date +%F) 00:00:00" +%s)
# glog_time FILE REGEX: Unix time of the first line matching REGEX (empty if none).
glog_time() {
  grep -E -m1 "$2" "$1" 2>/dev/null | awk -v m="$midnight" \
    '{split($2, c, ":"); printf "%.3f\n", m + c[1] * 3600 + c[2] * 60 + c[3]}' || true
}
glog_time_last() {
  grep -E "$2" "$1" 2>/dev/null | tail -1 | awk -v m="$midnight" \
    '{split($2, c, ":"); printf "%.3f\n", m + c[1] * 3600 + c[2] * 60 + c[3]}' || true
}
# Running (a killed child stays a zombie until reaped: that counts as gone).
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat:0:1}" != Z ]
}
# wait_gone SECONDS PID...: 0 when all have exited within SECONDS.
wait_gone() {
  local deadline p any
  deadline=$(echo "$(now) + $1" | bc); shift
  while :; do
    any=0
    for p in "$@"; do alive "$p" && any=1; done
    [ "$any" = 0 ] && return 0
    [ "$(echo "$(now) > $deadline" | bc)" = 1 ] && return 1
    sleep 0.1
  done
}
# wait_for SECONDS FILE REGEX
wait_for() {
  local deadline
  deadline=$(echo "$(now) + $1" | bc)
  until grep -qE "$3" "$2" 2>/dev/null; do
    [ "$(echo "$(now) > $deadline" | bc)" = 1 ] && return 1
    sleep 0.1
  done
}

# start NAME ARGS...: start a role in the background, log to $run/NAME.log,
# record NAME and PID (the sampler reads $run/pids).
declare -A pid
start() {
  local name=$1; shift
  "$keel" "$@" >> "$run/$name.log" 2>&1 &
  pid[$name]=$!
  started+=("$!")
  echo "$name $! $(now)" >> "$run/pids"
}

# Samples every process's /proc/PID/io (rchar, wchar) every 0.1 s.
sampler() {
  local t name p t0 k v r w
  while :; do
    t=$EPOCHREALTIME
    while read -r name p t0; do
      [ -r "/proc/$p/io" ] || continue
      r=""; w=""
      while read -r k v; do
        case $k in rchar:) r=$v ;; wchar:) w=$v ;; esac
      done < "/proc/$p/io" 2>/dev/null || true
      [ -n "$r" ] && echo "$t $name $p $r $w"
    done < "$run/pids"
    sleep 0.1
  done
}

job_flags() {
  echo --flagfile=configs/linear_learner.flags --train="$data/train" \
    --validation="$data/validation" --epochs="$epochs" --mini_batch_size="$batch" \
    --early_stopping_patience=1000 --heartbeat_interval="$hb_interval" \
    --model_dir="$run/model" --bind=127.0.0.1
}

run_one() {
  local kind=$1 extra=() port t_fault="" t_restart="" status=ok
  run="$work/$kind"
  rm -rf "$run"; mkdir -p "$run"; : > "$run/pids"
  [ "$kind" = drop ] && extra=(--drop_rate=0.01)
  local sched=(scheduler --bind=127.0.0.1 --num_servers=2 --num_workers=2
    --heartbeat_timeout="$hb_timeout" --heartbeat_interval="$hb_interval"
    --worker_replace_timeout=60 "${extra[@]}")
  local t0; t0=$(now); echo "$t0" > "$run/t0"
  start scheduler "${sched[@]}" --port_file="$run/port"
  sampler > "$run/io.dat" 2>/dev/null & sampler_pid=$!
  local deadline; deadline=$(echo "$t0 + 30" | bc)
  until [ -s "$run/port" ]; do
    [ "$(echo "$(now) > $deadline" | bc)" = 1 ] && { echo "no scheduler port" >&2; return 1; }
    sleep 0.05
  done
  port=$(cat "$run/port")
  for r in 0 1; do start server$r server --scheduler=127.0.0.1:$port --rank=$r $(job_flags) "${extra[@]}"; done
  for r in 0 1; do start worker$r worker --scheduler=127.0.0.1:$port --rank=$r $(job_flags) "${extra[@]}"; done

  if [ "$kind" != baseline ] && [ "$kind" != drop ]; then
    # Mid-run: 3 s after the leading worker's first epoch line (inside epoch 2).
    wait_for 120 "$run/worker0.log" '^epoch 1: ' || status="no epoch 1 within 120 s"
    sleep 3
    case $kind in
      worker)
        t_fault=$(now); kill -9 "${pid[worker1]}"; wait_gone 10 "${pid[worker1]}" || true
        sleep 1; t_restart=$(now)
        start worker1b worker --scheduler=127.0.0.1:$port --rank=1 $(job_flags) ;;
      scheduler)
        t_fault=$(now); kill -9 "${pid[scheduler]}"; wait_gone 10 "${pid[scheduler]}" || true
        sleep 1; t_restart=$(now)
        start scheduler2 "${sched[@]}" --port="$port" ;;
      server)
        t_fault=$(now); kill -9 "${pid[server1]}"; wait_gone 10 "${pid[server1]}" || true
        sleep 1; t_restart=$(now)
        start server1b server --scheduler=127.0.0.1:$port --rank=1 $(job_flags) ;;
    esac
  fi
  echo "${t_fault:-} ${t_restart:-}" > "$run/fault_times"
  # The job is over when every role has exited.
  local everyone=() name p t
  while read -r name p t; do everyone+=("$p"); done < "$run/pids"
  local limit=$run_timeout
  [ "$kind" = server ] && [ -n "$t_fault" ] && limit=$(echo "$t_fault + $server_wait - $(now)" | bc)
  if ! wait_gone "$limit" "${everyone[@]}"; then
    status="still running $(printf '%.0f' "$(echo "$(now) - ${t_fault:-$t0}" | bc)") s after the $([ -n "$t_fault" ] \&\& echo kill || echo start); killed"
    for p in "${everyone[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait_gone 10 "${everyone[@]}" || true
  fi
  local t_end; t_end=$(now)
  kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; sampler_pid=""
  for p in "${everyone[@]}"; do wait "$p" 2>/dev/null || true; done
  echo "$(echo "$t_end - $t0" | bc)" > "$run/wall"
  echo "$status" > "$run/status"
  echo "$kind: $(cat "$run/wall") s, $status" >&2
}

# ANALYSE_ONLY=1: tables and plot again from the last runs' logs.
[ -n "${ANALYSE_ONLY:-}" ] || for kind in "${runs[@]}"; do run_one "$kind"; done

# ---- Analysis ----------------------------------------------------------------
# Times below are seconds from the run's start (the scheduler's launch, t0), or
# from the kill (t_fault, recorded by this script just before `kill -9`).
rel() { [ -n "${1:-}" ] && [ -n "${2:-}" ] && printf '%.2f' "$(echo "$1 - $2" | bc)" || echo "-"; }
field() { grep -o "\"$2\": [-0-9.e+]*" "$1" 2>/dev/null | awk '{print $2}' || true; }

analyse() {
  local kind=$1 run="$work/$1" t0 t_fault t_restart lead
  t0=$(cat "$run/t0"); read -r t_fault t_restart < "$run/fault_times" || true
  # Validation loss against run time: history.jsonl's seconds count from the
  # leading worker's start of training, about when it registered.
  lead=$(glog_time "$run/worker0.log" 'WORKER 0 \(node')
  local off; off=$(echo "${lead:-$t0} - $t0" | bc)
  sed -E 's/.*"seconds": ([-0-9.e+]+).*"validation:objective_loss": ([-0-9.e+]+).*/\1 \2/' \
    "$run/model/history.jsonl" 2>/dev/null | awk -v o="$off" '{printf "%.3f %s\n", $1 + o, $2}' \
    > "$run/loss.dat" || true
  # The workers' combined send rate (bytes written by worker processes: pushes,
  # pulls, clocks; almost all of it network), MB/s in 0.5 s bins.
  awk -v t0="$t0" '$2 ~ /^worker/ {
      k = $2 " " $3
      if (k in last) { b = int(($1 - t0) / 0.5); sent[b] += $5 - last[k]; if (b > nb) nb = b }
      last[k] = $5 }
    END { for (b = 0; b <= nb; ++b) printf "%.2f %.4f\n", b * 0.5 + 0.25, sent[b] / 0.5 / 1e6 }' \
    "$run/io.dat" > "$run/rate.dat"
  local tf=""; [ -n "${t_fault:-}" ] && tf=$(echo "$t_fault - $t0" | bc)
  echo "${tf:-}" > "$run/fault_rel"
  # Throughput dip: the pre-fault median rate (from 3 s on), the lowest 1 s
  # mean in the 10 s after the kill, and the seconds spent below half the median.
  local med
  med=$(awk -v tf="${tf:-1e9}" '$1 > 3 && $1 < tf { print $2 }' "$run/rate.dat" | sort -g \
    | awk '{ a[NR] = $1 } END { printf "%.2f", NR ? a[int((NR + 1) / 2)] : 0 }')
  if [ -n "$tf" ]; then
    awk -v tf="$tf" -v med="$med" '{ t[NR] = $1; r[NR] = $2 }
      END {
        lo = -1; below = 0
        for (i = 2; i <= NR; ++i) if (t[i] >= tf && t[i] <= tf + 10) {
          m = (r[i - 1] + r[i]) / 2; if (lo < 0 || m < lo) lo = m
          if (r[i] < med / 2) below += 0.5 }
        printf "%.2f %.2f %.1f\n", med, lo, below }' "$run/rate.dat" > "$run/dip"
  else
    echo "$med - -" > "$run/dip"
  fi
}

for kind in "${runs[@]}"; do analyse "$kind"; done
base_loss=$(field "$work/baseline/model/metrics.json" validation:objective_loss)

row() {
  local kind=$1 run="$work/$1" t0 t_fault t_restart loss exs="-" med lo below detect="-" back="-" served="-" what
  t0=$(cat "$run/t0"); read -r t_fault t_restart < "$run/fault_times" || true
  read -r med lo below < "$run/dip"
  loss=$(field "$run/model/metrics.json" validation:objective_loss)
  [ -s "$run/model/history.jsonl" ] && exs=$(awk -F'[:,]' '{ for (i = 1; i < NF; ++i) {
      if ($i ~ /"seconds"$/) s = $(i + 1) + 0; if ($i ~ /"examples"$/) e += $(i + 1) } }
    END { printf "%.0f", s > 0 ? e / s : 0 }' "$run/model/history.jsonl")
  case $kind in
    baseline) what="no fault" ;;
    drop) what="1% of data messages dropped on every node; workers resent $( (grep -ho 'resent [0-9]*' "$run"/worker*.log || true) | awk '{s += $2} END {print s + 0}') request parts" ;;
    worker)
      what="worker 1 killed -9 at t=$(rel "$t_fault" "$t0") s, restarted with --rank 1 at +$(rel "$t_restart" "$t_fault") s"
      detect=$(rel "$(glog_time "$run/scheduler.log" 'worker 1 .*leaves the cluster')" "$t_fault")
      back=$(rel "$(glog_time "$run/scheduler.log" 'worker 1 is replaced')" "$t_fault")
      # First 256 KiB written by the replacement: its first minibatch's pushes.
      served=$(rel "$(awk '$2 == "worker1b" { if (!b) b = $5; if ($5 - b >= 262144) { print $1; exit } }' "$run/io.dat")" "$t_fault") ;;
    scheduler)
      what="scheduler killed -9 at t=$(rel "$t_fault" "$t0") s, restarted on port $(cat "$run/port") at +$(rel "$t_restart" "$t_fault") s"
      back=$(rel "$(glog_time "$run/scheduler2.log" 'cluster view epoch')" "$t_fault")
      served="not interrupted" ;;
    server)
      what="server 1 killed -9 at t=$(rel "$t_fault" "$t0") s, restarted with --rank 1 at +$(rel "$t_restart" "$t_fault") s" ;;
  esac
  local status; status=$(cat "$run/status")
  local dloss="-"
  [ -n "$loss" ] && [ -n "$base_loss" ] && dloss=$(awk -v a="$loss" -v b="$base_loss" 'BEGIN { printf "%+.2f%%", (a - b) / b * 100 }')
  local result="finished"
  [ "$status" != ok ] && result="$status"
  [ -z "$loss" ] && loss="-"
  printf '| %s | %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s | %s (%s) |\n' "$kind" "$what" "$result" \
    "$(cat "$run/wall")" "$exs" "$med" "$lo" "$below" "$detect" "$back" "$served" "$loss" "$dloss"
}

{
  echo "Command: ROWS=$rows FEATURES=$features EPOCHS=$epochs BATCH=$batch scripts/experiments/faults.sh"
  echo
  echo "Linear learner (configs/linear_learner.flags), $rows rows x $features features (keel datagen,"
  echo "20 non-zeros a row), $epochs epochs, minibatches of $batch, 2 servers and 2 workers started one by"
  echo "one on 127.0.0.1 of one shared 2-core machine; --heartbeat_interval=$hb_interval on every role,"
  echo "scheduler --heartbeat_timeout=$hb_timeout --worker_replace_timeout=60. Faults are sent 3 s after the"
  echo "leading worker's 'epoch 1:' line. Times after a fault count from the kill."
  echo
  echo "| run | fault | outcome | wall s | examples/s | send MB/s (median) | lowest 1 s MB/s in 10 s after | s below half | s to detection | s to view again | s to first push again | final validation loss (vs baseline) |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  for kind in "${runs[@]}"; do row "$kind"; done
} | tee "$out/faults.md"

# Plot: validation loss (top) and the workers' send rate (bottom) against run
# time, one colour per run, its fault as a dashed line of the same colour.
colors=(black '#1f77b4' '#d62728' '#2ca02c' '#ff7f0e')
arrows=""
i=0
for kind in "${runs[@]}"; do
  tf=$(cat "$work/$kind/fault_rel")
  [ -n "$tf" ] && arrows+=" set arrow from $tf, graph 0 to $tf, graph 1 nohead dt 2 lw 2 lc rgb '${colors[$i]}';"
  i=$((i + 1))
done
loss_plot=" plot"; rate_plot=" plot"
i=0
for kind in "${runs[@]}"; do
  [ -s "$work/$kind/loss.dat" ] && loss_plot+=" '$work/$kind/loss.dat' using 1:2 with linespoints lw 2 lc rgb '${colors[$i]}' title '$kind',"
  rate_plot+=" '$work/$kind/rate.dat' using 1:2 with lines lc rgb '${colors[$i]}' title '$kind',"
  i=$((i + 1))
done
plot="set terminal pngcairo size 1000,800 font 'DejaVu Sans,10'; set output '$out/faults.png';"
plot+=" set multiplot layout 2,1; set grid; set key top right; $arrows"
plot+=" set title 'Validation loss against run time (dashed: the kill)'; set ylabel 'validation logistic loss';"
plot+=" set xlabel 'seconds from the scheduler start';"
plot+="${loss_plot%,};"
plot+=" set title 'Workers'' combined send rate (/proc/PID/io wchar, 0.5 s bins)'; set ylabel 'MB/s';"
plot+="${rate_plot%,}; unset multiplot"
gnuplot -e "$plot"
echo "plot: $out/faults.png"
