# shellcheck shell=bash
# What the benchmark and experiment scripts share (sourced, as
# `source "$(dirname "$0")/../lib/bench.sh"` from scripts/bench/ and scripts/experiments/).
# Sourcing it moves to the repository root, where the scripts' relative paths start.
#   keel_binary [--absolute] [VARIABLE]   prints build/keel, or $VARIABLE when it is set
#                         (the scripts that take KEEL pass KEEL); with --absolute, a relative
#                         one under $PWD
#   cached_datagen DIR FLAGS...   `$keel datagen FLAGS... --out=DIR`, unless DIR already
#                         holds a set (its oracle.json)
#   cached_train_set DIR  cached_datagen of the training benchmark's linear set
#                         (10^6 rows, 10^5 features, seed 11), which other benchmarks share
#   install_missing COMMAND PACKAGE   apt-get installs PACKAGE (with sudo when not root)
#                         when COMMAND is not on the PATH
#   now, now_ns           the Unix time: $EPOCHREALTIME (6 decimals), date's (9 decimals)
#   wait_until SECONDS POLL COMMAND...   runs COMMAND every POLL s until it succeeds;
#                         fails after SECONDS
#   wait_for SECONDS FILE REGEX [POLL]   waits until a line of FILE matches REGEX,
#                         looking every POLL s (0.05); fails after SECONDS
#   glog_time FILE REGEX [DIGITS], glog_time_last FILE REGEX [DIGITS]   the Unix time
#                         of the first (last) line of FILE matching REGEX, its glog stamp
#                         read against `midnight`, with DIGITS decimals (6); "" if none
#   track_processes [--cont] [COMMAND...]   from here on every PID given to `tracked`
#                         is killed when the script exits, then COMMAND runs; INT and
#                         TERM exit with 130
#   tracked PID...        adds PIDs for track_processes
#   kill_pids [--cont] PID...   kill -9 each PID; with --cont, SIGCONT first (a stopped
#                         process); never fails
#   wrk_post_script LUA TYPE BODY   writes wrk's Lua script LUA: every request a POST
#                         of the file BODY as Content-Type TYPE, Accept application/json
#   liblinear_fit C TRAIN MODEL   LIBLINEAR -s 0 (L2-regularized logistic regression,
#                         primal, one thread) at cost C on the libsvm file TRAIN, into
#                         MODEL; prints the training wall seconds
#   liblinear_auc VALIDATION MODEL PREDICTIONS   MODEL's probabilities for the libsvm
#                         file VALIDATION into PREDICTIONS; prints their AUC
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit

# shellcheck disable=SC2120 # its arguments are optional
keel_binary() {
  local prefix=""
  if [ "${1:-}" = --absolute ]; then prefix="$PWD/"; shift; fi
  local binary=build/keel
  [ -z "${1:-}" ] || binary=${!1:-build/keel}
  [ "${binary#/}" = "$binary" ] || prefix=""  # an absolute path stays as it is
  echo "$prefix$binary"
}

cached_datagen() {
  local out=$1; shift
  # shellcheck disable=SC2154 # keel: the sourcing script's
  [ -f "$out/oracle.json" ] || $keel datagen "$@" --out="$out" >/dev/null
}

cached_train_set() {
  cached_datagen "$1" --model=linear --rows=1000000 --features=100000 --nnz=20 --num_factors=4 \
    --seed=11
}

install_missing() {
  command -v "$1" >/dev/null 2>&1 && return 0
  local sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y -q "$2" >/dev/null
}

# The median of the numbers on stdin, one a line (of an even count, the mean
# of the middle two).
median() {
  sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

now() { echo "$EPOCHREALTIME"; }
now_ns() { date +%s.%N; }

wait_until() {
  local deadline poll=$2
  deadline=$(echo "$(now) + $1" | bc)
  shift 2
  until "$@"; do
    [ "$(echo "$(now) > $deadline" | bc)" = 1 ] && return 1
    sleep "$poll"
  done
}
file_matches() { grep -qE "$2" "$1" 2>/dev/null; }

# start NAME ARGS...: `$keel ARGS` in the background, its output in
# $run/NAME.log, its PID added to the caller's `pids` array and kept in
# pid_NAME (`run`, `pids` and an optional nice level `start_nice` are the
# calling function's locals).
start() {
  local name=$1; shift
  # shellcheck disable=SC2154 # keel, run, start_nice: the caller's
  ${start_nice:+nice -n "$start_nice"} "$keel" "$@" > "$run/$name.log" 2>&1 &
  pids+=("$!"); tracked "$!"
  eval "pid_$name=$!"
}

# start_replicated_pair RUN HB_TIMEOUT HB_INTERVAL JOB_FLAGS...: a scheduler on
# 127.0.0.1 (2 servers, 2 workers, --replication=1, its membership log in
# RUN), then servers 0 and 1 and workers 0 and 1 with JOB_FLAGS (the workers'
# models in RUN/model0 and RUN/model1), each through `start NAME COMMAND
# FLAGS...`. Returns 1 if the scheduler gives no port in 30 s.
start_replicated_pair() {
  local run=$1 hb_timeout=$2 hb_interval=$3 port r
  shift 3
  start scheduler scheduler --bind=127.0.0.1 --port_file="$run/port" --num_servers=2 \
    --num_workers=2 --replication=1 --heartbeat_timeout="$hb_timeout" \
    --heartbeat_interval="$hb_interval" --membership_log="$run/membership.jsonl"
  wait_until 30 0.05 test -s "$run/port" || { echo "no scheduler port" >&2; return 1; }
  port=$(cat "$run/port")
  for r in 0 1; do start "server$r" server --scheduler=127.0.0.1:"$port" --rank=$r "$@"; done
  for r in 0 1; do
    start "worker$r" worker --scheduler=127.0.0.1:"$port" --rank=$r "$@" --model_dir="$run/model$r"
  done
}
wait_for() { wait_until "$1" "${4:-0.05}" file_matches "$2" "$3"; }

# glog stamps are local wall-clock time of day; midnight turns them into Unix seconds.
midnight=$(date -d "$(date +%F) 00:00:00" +%s)
glog_seconds() {  # DIGITS: stdin's glog lines as Unix times
  awk -v m="$midnight" -v d="$1" \
    '{split($2, c, ":"); printf "%." d "f\n", m + c[1] * 3600 + c[2] * 60 + c[3]}'
}
glog_time() { grep -E -m1 "$2" "$1" 2>/dev/null | glog_seconds "${3:-6}" || true; }
glog_time_last() { grep -E "$2" "$1" 2>/dev/null | tail -1 | glog_seconds "${3:-6}" || true; }

keel_tracked=()
keel_tracked_cont=()
keel_on_exit=()
# shellcheck disable=SC2120 # its arguments are optional
track_processes() {
  if [ "${1:-}" = --cont ]; then keel_tracked_cont=(--cont); shift; fi
  keel_on_exit=("$@")
  trap keel_exit EXIT
  trap 'exit 130' INT TERM
}
tracked() { keel_tracked+=("$@"); }
keel_exit() {
  kill_pids "${keel_tracked_cont[@]}" "${keel_tracked[@]}"
  if [ ${#keel_on_exit[@]} -gt 0 ]; then "${keel_on_exit[@]}"; fi
}
kill_pids() {
  local cont=0 p
  if [ "${1:-}" = --cont ]; then cont=1; shift; fi
  for p in "$@"; do
    [ "$cont" = 0 ] || kill -CONT "$p" 2>/dev/null || true
    kill -9 "$p" 2>/dev/null || true
  done
}

wrk_post_script() {
  cat > "$1" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "$2"
wrk.headers["Accept"] = "application/json"
local f = io.open("$3", "rb")
wrk.body = f:read("*a")
f:close()
EOF
}

# Both are called as $(...), which does not inherit set -e: a failure returns at once.
liblinear_fit() {
  local start end
  start=$(now_ns)
  liblinear-train -q -s 0 -c "$1" "$2" "$3" || return
  end=$(now_ns)
  echo "$end - $start" | bc
}
liblinear_auc() {
  local validation=$1 predictions=$3 column
  liblinear-predict -b 1 "$validation" "$2" "$predictions" >/dev/null || return
  # Output: a header "labels 1 0" (or "0 1"), then "predicted p(first) p(second)".
  column=$(head -1 "$predictions" | awk '{print ($2 == 1) ? 2 : 3}') || return
  paste -d' ' <(cut -d' ' -f1 "$validation") \
      <(tail -n +2 "$predictions" | awk -v c="$column" '{print $c}') \
    | sort -g -k2 | awk -f scripts/bench/auc.awk
}
