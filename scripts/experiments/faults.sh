#!/usr/bin/env bash
# Fault experiment: the linear learner on `keel datagen` data, 2 servers and 2
# workers started one by one (as on a cluster, fixed scheduler port), under
#   baseline   no fault
#   worker     worker 1 killed -9 mid-run, started again with --rank 1 a second later
#   scheduler  the scheduler killed -9 mid-run, started again on the same port a second later
#   drop       1% of every node's outgoing data messages dropped (--drop_rate=0.01 on every
#              role), with --request_timeout_ms=100 (the recorded run had fixed resend
#              timeouts; with round-trip estimates it is only the first estimate, and
#              scripts/bench/drops.sh measures drops at the defaults)
#   server     server 1 killed -9 mid-run and started again with --rank 1; the job checkpoints
#              (scheduler --checkpoint_uri, --checkpoint_every=CKPT_EVERY minibatches) and the
#              replacement restores server 1's key ranges from the latest checkpoint
#   replica    the same kill and restart with --replication=1 (each key range on both servers,
#              chain replication) and no checkpoints: server 0's backup of server 1's range is
#              promoted, and the restarted server 1 copies both ranges from server 0
# For each run: wall time, the workers' combined examples/s, the dip after the
# fault, recovery milestones, and the final validation loss against the
# baseline's. Figures come from what the roles recorded in the run's model
# folder (history.jsonl, metrics.json and the timeline: the workers' samples,
# the scheduler's membership lines; read by scripts/experiments/timeline.py);
# only the servers' own recovery milestones (a replacement's first push served,
# its replica copies) and the checkpoint a replacement restored come from
# their log lines, which is the one place that records them. Writes the table
# to stdout and docs/experiments/faults.md, the plot to docs/experiments/faults.png.
#
#   scripts/experiments/faults.sh      (ROWS, FEATURES, EPOCHS, BATCH, RUNS, SERVER_WAIT,
#                                       CKPT_EVERY override)
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
rows="${ROWS:-600000}"
features="${FEATURES:-60000}"
epochs="${EPOCHS:-8}"
batch="${BATCH:-200}"
runs=(${RUNS:-baseline worker scheduler drop server replica})
server_wait="${SERVER_WAIT:-120}" # seconds the server-kill run may go on after the kill
ckpt_every="${CKPT_EVERY:-300}"   # server run: minibatches per worker between checkpoints
drop_timeout_ms=100               # drop run: --request_timeout_ms on every role
run_timeout=300                   # any other run is stopped after this (and reported)
hb_interval=0.2
hb_timeout=1
work="${KEEL_EXPERIMENT_DIR:-/tmp/keel-faults}"
out=docs/experiments
keel=$(keel_binary --absolute)
timeline="$PWD/scripts/experiments/timeline.py"
install_missing gnuplot gnuplot-nox
mkdir -p "$work" "$out"
data="$work/data-$rows-$features"
cached_datagen "$data" --model=linear --rows="$rows" --features="$features" --nnz=20 --seed=5

# Every process this script starts is killed on the way out.
track_processes

# Running (a killed child stays a zombie until reaped: that counts as gone).
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat:0:1}" != Z ]
}
none_alive() {
  local p
  for p in "$@"; do alive "$p" && return 1; done
  return 0
}
# wait_gone SECONDS PID...: 0 when all have exited within SECONDS.
wait_gone() {
  local seconds=$1; shift
  wait_until "$seconds" 0.1 none_alive "$@"
}
# start NAME ARGS...: start a role in the background, log to $run/NAME.log,
# record NAME, PID and start time in $run/pids.
declare -A pid
start() {
  local name=$1; shift
  "$keel" "$@" >> "$run/$name.log" 2>&1 &
  pid[$name]=$!
  tracked "$!"
  echo "$name $! $(now)" >> "$run/pids"
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
  [ "$kind" = drop ] && extra=(--drop_rate=0.01 --request_timeout_ms="$drop_timeout_ms")
  local sched=(scheduler --bind=127.0.0.1 --num_servers=2 --num_workers=2
    --heartbeat_timeout="$hb_timeout" --heartbeat_interval="$hb_interval"
    --worker_replace_timeout=60 --model_dir="$run/model" "${extra[@]}")
  [ "$kind" = server ] && sched+=(--checkpoint_uri="file://$run/ckpt" --checkpoint_every="$ckpt_every")
  [ "$kind" = replica ] && sched+=(--replication=1)
  local t0; t0=$(now); echo "$t0" > "$run/t0"
  start scheduler "${sched[@]}" --port_file="$run/port"
  wait_until 30 0.05 test -s "$run/port" || { echo "no scheduler port" >&2; return 1; }
  port=$(cat "$run/port")
  for r in 0 1; do start server$r server --scheduler=127.0.0.1:$port --rank=$r $(job_flags) "${extra[@]}"; done
  for r in 0 1; do start worker$r worker --scheduler=127.0.0.1:$port --rank=$r $(job_flags) "${extra[@]}"; done

  if [ "$kind" != baseline ] && [ "$kind" != drop ]; then
    # Mid-run: 3 s after the leading worker's first epoch line (inside epoch 2).
    wait_for 120 "$run/worker0.log" '^epoch 1: ' 0.1 || status="no epoch 1 within 120 s"
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
      server|replica)
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
  case $kind in server|replica) [ -n "$t_fault" ] && limit=$(echo "$t_fault + $server_wait - $(now)" | bc) ;; esac
  if ! wait_gone "$limit" "${everyone[@]}"; then
    local since=start; [ -n "$t_fault" ] && since=kill
    status="still running $(printf '%.0f' "$(echo "$(now) - ${t_fault:-$t0}" | bc)") s after the $since; killed"
    kill_pids "${everyone[@]}"
    wait_gone 10 "${everyone[@]}" || true
  fi
  local t_end; t_end=$(now)
  for p in "${everyone[@]}"; do wait "$p" 2>/dev/null || true; done
  echo "$(echo "$t_end - $t0" | bc)" > "$run/wall"
  echo "$status" > "$run/status"
  echo "$kind: $(cat "$run/wall") s, $status" >&2
}

# ANALYSE_ONLY=1: tables and plot again from the last runs' logs.
[ -n "${ANALYSE_ONLY:-}" ] || for kind in "${runs[@]}"; do run_one "$kind"; done

# ---- Analysis ----------------------------------------------------------------
# Every time is a Unix time: the script's clock ($EPOCHREALTIME, taken just
# before `kill -9` for t_fault), or a glog stamp (wall-clock time of day on the
# same machine) turned into one. Tables show seconds from the kill, plots
# seconds from the run's start (the scheduler's launch, t0).
rel() { [ -n "${1:-}" ] && [ -n "${2:-}" ] && printf '%.2f' "$(echo "$1 - $2" | bc)" || echo "-"; }
field() { grep -o "\"$2\": [-0-9.e+]*" "$1" 2>/dev/null | awk '{print $2}' || true; }

# at MODEL_DIR FILE EVENT [KEY=VALUE...] [--after T] [--last]: the Unix time of
# the first (last) matching line of the run's timeline/FILE.jsonl ("" if none).
at() { python3 "$timeline" event "$@" || true; }
# samples_between A B: the workers' timeline samples from Unix time A to B.
samples_between() {
  cat "$run"/model/timeline/worker-*.jsonl 2>/dev/null | grep '"event": "sample"' \
    | grep -oE '^\{"time": [0-9.]+' | awk -v a="$1" -v b="$2" '$2 > a && $2 < b' | wc -l
}
# first_after T: the first line of stdin (sorted times) greater than T.
first_after() { awk -v t="$1" '$1 > t { print; exit }'; }

analyse() {
  local kind=$1 run="$work/$1" t0 t_fault t_restart lead w
  t0=$(cat "$run/t0"); read -r t_fault t_restart < "$run/fault_times" || true
  # Validation loss against run time: history.jsonl's seconds count from the
  # leading worker's start of training, its timeline's first "start" line.
  lead=$(at "$run/model" worker-0 start)
  local off; off=$(echo "${lead:-$t0} - $t0" | bc)
  python3 "$timeline" history "$run/model" validation:objective_loss "$off" > "$run/loss.dat" || true
  # The workers' combined rate, examples/s in 1 s bins from t0: each worker
  # process's examples spread evenly between its consecutive timeline samples
  # (one every 2 s while it trains, and one at the end of each epoch share).
  python3 "$timeline" rate "$run/model" "$t0" > "$run/rate.dat" || true
  local tf=""; [ -n "${t_fault:-}" ] && tf=$(echo "$t_fault - $t0" | bc)
  echo "${tf:-}" > "$run/fault_rel"
  # Median over the run (every 1 s bin from the first epoch's start to the
  # last epoch's end, between-epoch pauses included), and the lowest bin whose
  # middle is within 10 s after the kill.
  local med lo="-"
  med=$(awk '{ print $2 }' "$run/rate.dat" | sort -g \
    | awk '{ a[NR] = $1 } END { printf "%.0f", NR ? (a[int((NR + 1) / 2)] + a[int(NR / 2) + 1]) / 2 : 0 }')
  [ -n "$tf" ] && lo=$(awk -v tf="$tf" '$1 >= tf && $1 <= tf + 10 { if (lo == "" || $2 < lo) lo = $2 }
    END { print lo == "" ? "-" : lo }' "$run/rate.dat")
  echo "$med $lo" > "$run/dip"
}

for kind in "${runs[@]}"; do analyse "$kind"; done
base_loss=$(field "$work/baseline/model/metrics.json" validation:objective_loss)
base_med=$(awk '{ print $1 }' "$work/baseline/dip" 2>/dev/null || true)
resent() { (grep -ho 'resent [0-9]* request part' "$1"/worker*.log || true) | awk '{ s += $2 } END { print s + 0 }'; }
notes=()

row() {
  local kind=$1 run="$work/$1" t0 t_fault t_restart loss med lo dip="-" detect="-" back="-" recover="-" what
  t0=$(cat "$run/t0"); read -r t_fault t_restart < "$run/fault_times" || true
  read -r med lo < "$run/dip"
  [ "$lo" != "-" ] && [ -n "$base_med" ] && dip=$(awk -v a="$lo" -v b="$base_med" 'BEGIN { printf "%.0f (%.0f%%)", a, a / b * 100 }')
  loss=$(field "$run/model/metrics.json" validation:objective_loss)
  case $kind in
    baseline) what="no fault" ;;
    drop)
      what="1% of data messages dropped on every node, --request_timeout_ms=$drop_timeout_ms; the workers resent $(resent "$run") request part(s)" ;;
    worker)
      what="worker 1 killed -9 at t=$(rel "$t_fault" "$t0") s, restarted with --rank 1 at +$(rel "$t_restart" "$t_fault") s"
      detect=$(rel "$(at "$run/model" scheduler leave role=worker rank=1)" "$t_fault")
      back=$(rel "$(at "$run/model" scheduler join role=worker rank=1 --after "$t_fault")" "$t_fault")
      # The replacement's first timeline sample (2 s into its training).
      recover=$(rel "$(at "$run/model" worker-1 sample --after "$t_restart")" "$t_fault")
      notes+=("worker: the replacement started training (its timeline's start line) $(rel "$(at "$run/model" worker-1 start --after "$t_restart")" "$t_fault") s after the kill; recovery is its first sample.") ;;
    scheduler)
      what="scheduler killed -9 at t=$(rel "$t_fault" "$t0") s, restarted on port $(cat "$run/port") at +$(rel "$t_restart" "$t_fault") s"
      local t_view; t_view=$(at "$run/model" scheduler view --after "$t_restart")
      back=$(rel "$t_view" "$t_fault")
      recover=$back
      notes+=("scheduler: worker timeline samples between the kill and the new scheduler's first view: $(samples_between "$t_fault" "${t_view:-$t_fault}").") ;;
    server)
      what="server 1 killed -9 at t=$(rel "$t_fault" "$t0") s, restarted with --rank 1 at +$(rel "$t_restart" "$t_fault") s; checkpoints every $ckpt_every minibatches per worker; the workers resent $(resent "$run") request part(s)"
      detect=$(rel "$(at "$run/model" scheduler leave role=server rank=1)" "$t_fault")
      local t_repl; t_repl=$(at "$run/model" scheduler join role=server rank=1 --after "$t_fault")
      back=$(rel "$t_repl" "$t_fault")
      recover=$(rel "$(glog_time "$run/server1b.log" 'first push served since this server became' 3)" "$t_fault")
      local ck; ck=$(grep -oE 'server 1 is replaced after .*' "$run/scheduler.log" | head -1 || true)
      local ckid; ckid=$(echo "$ck" | grep -oE 'ckpt-[0-9]+-[0-9]+' || true)
      local started_before; started_before=$(grep -E 'checkpoint ckpt-[0-9]+-[0-9]+: servers copy' "$run/scheduler.log" \
        | awk -v m="$midnight" -v tf="$t_fault" '{split($2, c, ":"); t = m + c[1] * 3600 + c[2] * 60 + c[3]; if (t < tf) id = $0} END { print id }' \
        | grep -oE 'ckpt-[0-9]+-[0-9]+' || true)
      local t_ck; [ -n "$ckid" ] && t_ck=$(glog_time "$run/scheduler.log" "checkpoint $ckid committed" 3)
      local t_next; [ -n "$t_repl" ] && t_next=$(grep -E 'checkpoint ckpt-[0-9]+-[0-9]+: servers copy' "$run/scheduler.log" \
        | awk -v m="$midnight" -v t="$t_repl" '{split($2, c, ":"); s = m + c[1] * 3600 + c[2] * 60 + c[3]; if (s > t) { printf "%.6f %s\n", s, $0; exit }}' || true)
      notes+=("server: '${ck:-no replacement line}'. Restored checkpoint $ckid committed $(rel "${t_ck:-}" "$t_fault") s from the kill; the last checkpoint begun before the kill: ${started_before:-none}; abandoned: $(grep -c 'abandoned' "$run/scheduler.log" || true). First checkpoint begun after the replacement: $(echo "${t_next:-}" | grep -oE 'ckpt-[0-9]+-[0-9]+' || echo none), $(rel "$(echo "${t_next:-}" | awk '{print $1}')" "$t_fault") s after the kill.") ;;
    replica)
      what="server 1 killed -9 at t=$(rel "$t_fault" "$t0") s, restarted with --rank 1 at +$(rel "$t_restart" "$t_fault") s; --replication=1, no checkpoints; the workers resent $(resent "$run") request part(s)"
      detect=$(rel "$(at "$run/model" scheduler leave role=server rank=1)" "$t_fault")
      back=$(rel "$(at "$run/model" scheduler join role=server rank=1 --after "$t_fault")" "$t_fault")
      recover=$(rel "$(glog_time "$run/server0.log" 'first push served since this server became' 3)" "$t_fault")
      notes+=("replica: '$(grep -oE 'leaves the cluster: .*' "$run/scheduler.log" | head -1 || true)'. The restarted server 1 had both ranges copied from server 0 $(rel "$(glog_time_last "$run/server1b.log" 'holds a replica of it again' 3)" "$t_fault") s after the kill: $(grep -oE 'received [0-9]+ rows' "$run/server1b.log" | awk '{ s += $2 } END { print s + 0 }') rows, $(grep -oE '\([0-9]+ push\(es\) held' "$run/server1b.log" | tr -d '(' | awk '{ s += $1 } END { print s + 0 }') push(es) held meanwhile.") ;;
  esac
  local status; status=$(cat "$run/status")
  local dloss="-"
  [ -n "$loss" ] && [ -n "$base_loss" ] && dloss=$(awk -v a="$loss" -v b="$base_loss" 'BEGIN { printf "%+.2f%%", (a - b) / b * 100 }')
  local result="finished"
  [ "$status" != ok ] && result="$status"
  [ -z "$loss" ] && loss="-"
  printf '| %s | %s | %s | %.1f | %s | %s | %s | %s | %s | %s (%s) |\n' "$kind" "$what" "$result" \
    "$(cat "$run/wall")" "$med" "$dip" "$detect" "$back" "$recover" "$loss" "$dloss"
}

{
  echo "Command: ROWS=$rows FEATURES=$features EPOCHS=$epochs BATCH=$batch CKPT_EVERY=$ckpt_every scripts/experiments/faults.sh"
  echo
  echo "Linear learner (configs/linear_learner.flags), $rows rows x $features features (keel datagen,"
  echo "20 non-zeros a row), $epochs epochs, minibatches of $batch, 2 servers and 2 workers started one by"
  echo "one on 127.0.0.1 of one shared 2-core machine; --heartbeat_interval=$hb_interval on every role,"
  echo "scheduler --heartbeat_timeout=$hb_timeout --worker_replace_timeout=60. Faults are sent 3 s after the"
  echo "leading worker's 'epoch 1:' line. Times after a fault count from the kill (the script's clock"
  echo "just before kill -9); the others are glog stamps of the same machine's wall clock."
  echo
  echo "examples/s: both workers together, from their timeline samples (every 2 s while training, and"
  echo "at each epoch share's end), each process's examples spread evenly between consecutive samples,"
  echo "summed in 1 s bins; the median is"
  echo "over every bin from the first epoch's start to the last epoch's end, so the pauses between epochs"
  echo "(validation, barrier) count. Lowest after the kill: the lowest bin within 10 s after it, and its"
  echo "share of the baseline run's median. Detection: the scheduler's timeline 'leave' line;"
  echo "replaced: its 'join' line for the rank (for the scheduler run: the new scheduler's first"
  echo "'view' line); recovery: for the server and replica runs, kill to the first push"
  echo "served again for server 1's range (the new primary's 'first push served since this server became"
  echo "its primary' line: the restored replacement, or the promoted backup); for the worker run the"
  echo "replacement worker's first timeline sample (2 s into its training); for the scheduler run the"
  echo "same as 'replaced' (training does not stop)."
  echo
  echo "| run | fault | outcome | wall s | examples/s (median) | lowest 1 s examples/s within 10 s after the kill (% of baseline median) | s to detection | s to replaced | s to recovery | final validation loss (vs baseline) |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  for kind in "${runs[@]}"; do row "$kind"; done
  echo
  for n in "${notes[@]}"; do echo "- $n"; done
} > "$out/faults.md"
cat "$out/faults.md"

# Plot: validation loss (top) and the workers' combined examples/s (bottom)
# against run time, one colour per run, its kill as a dashed line of the same colour.
colors=(black '#1f77b4' '#d62728' '#2ca02c' '#ff7f0e' '#9467bd')
# x axis: the longest run but the drop run (which is several times longer: it is cut off).
xmax=$(for kind in "${runs[@]}"; do [ "$kind" = drop ] || cat "$work/$kind/wall"; done \
  | sort -g | tail -1 | awk '{ printf "%.0f", $1 + 2 }')
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
  [ -s "$work/$kind/rate.dat" ] && rate_plot+=" '$work/$kind/rate.dat' using 1:2 with steps lc rgb '${colors[$i]}' title '$kind',"
  i=$((i + 1))
done
plot="set terminal pngcairo size 1000,800 font 'DejaVu Sans,10'; set output '$out/faults.png';"
plot+=" set multiplot layout 2,1; set grid; set key top right; $arrows"
plot+=" set title 'Validation loss against run time (dashed: the kill)'; set ylabel 'validation logistic loss';"
plot+=" set xlabel 'seconds from the scheduler start (the drop run goes on beyond)'; ${xmax:+set xrange [0:$xmax];}"
plot+="${loss_plot%,};"
plot+=" set title 'Both workers'' examples/s (from their timeline samples, 1 s bins)'; set ylabel 'examples/s';"
plot+="${rate_plot%,}; unset multiplot"
gnuplot -e "$plot"
echo "plot: $out/faults.png"
