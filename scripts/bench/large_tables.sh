#!/usr/bin/env bash
# Large tables: a sparse linear learner (one model, adagrad: one float of
# optimizer state a weight, no learning-rate schedule, key admission off)
# whose weight table holds KEYS distinct keys, on one machine:
#   1. train: 4 servers, 1 worker, one epoch, server 3 drained while it trains
#      (--faults=drain:server:3@DRAIN_AT: its key ranges move live to the
#      other 3 while pushes go on); the job ends with a checkpoint in a local
#      folder, written by 3 servers;
#   2. resume: the same job on 5 servers (--resume=latest): each restores its
#      share of the checkpoint; the checkpoint is the job's last, so the
#      resumed job then ends at once and worker 0 dumps the model from the 5,
#      which must be the trained job's model byte for byte.
# The training rows come from a generator through a FIFO (`pipe:`), never on
# disk: row i holds features i*NNZ+1 .. i*NNZ+NNZ (each feature once: KEYS
# distinct keys in KEYS/NNZ rows), its label a coin toss (a scale test, not a
# learning one).
# While each job runs, every second: each role's RSS, and each server's
# keel_server_table_rows / keel_server_table_memory_bytes from its /metrics.
# It prints, per phase: the table's bytes a key against the bound (8-byte key
# + 4-byte weight + 4-byte adagrad state = 16), each server's peak RSS a key,
# the worker's peak, the checkpoint's write and the restore's read in GB/s per
# server (from the servers' logs), and the drain's time per GB moved (the rows
# server 3 held when it left, 16 bytes each: key, weight, adagrad state). It stops
# a job (SIGINT to the launcher, by PID) if the machine's available memory
# falls under KEEL_MIN_AVAILABLE_GB (3). Figures: docs/BENCHMARKS.md ("Large
# tables").
#
#   scripts/bench/large_tables.sh [KEYS] [NNZ] [DRAIN_AT]
#   (KEYS 200000000, NNZ 20, DRAIN_AT 60s (30s for 10^8 keys); KEYS at most 2^31 - 1, mawk's integers)
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
keys="${1:-200000000}"
nnz="${2:-20}"
drain_at="${3:-60s}"  # about half way through the epoch at 2x10^8 keys
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-large}"
min_available_gb="${KEEL_MIN_AVAILABLE_GB:-3}"
keel=$(keel_binary KEEL)
if ((keys > 2147483647 || keys < nnz)); then
  echo "KEYS $keys: between NNZ ($nnz) and 2^31 - 1" >&2
  exit 2
fi
rows=$(((keys + nnz - 1) / nnz))
rm -rf "$work"
mkdir -p "$work"
track_processes

job=(--job=linear_learner --num_models=1 --optimizer=adagrad --use_lr_scheduler=false
  --admit_after=0 --normalize_data=false --mini_batch_size=1000 --data_format=libsvm
  --key_ranges=20 --train="pipe:$work/train.fifo" --checkpoint_uri="file://$work/ckpt"
  --cache_dir=none --scheduler_timeout=600)
# --scheduler_timeout: at 3x10^7 rows a server, on 2 shared cores, a server's
# receive thread is busy for over the default 60 s between the checkpoint's
# copy and the model dump's pages at the job's end, and it gave up on the
# scheduler (docs/BENCHMARKS.md, "Large tables").

# Writes the rows into the FIFO (run in the background; the worker reads it).
generate() {
  # exec: the FIFO's writer is this process, so killing it ends a writer still
  # waiting for a reader (a resumed job that reads no rows).
  exec mawk -v rows="$rows" -v nnz="$nnz" -v keys="$keys" 'BEGIN {
    srand(1)
    for (i = 0; i < rows; i++) {
      f = i * nnz
      line = (rand() < 0.5 ? "0" : "1")
      for (j = 1; j <= nnz && f + j <= keys; j++) line = line " " (f + j) ":1"
      print line
    }
  }' >"$work/train.fifo"
}

# Samples the launch LAUNCH_PID's processes every second into SAMPLES until it
# exits: "t pid role peak_kb rss_kb" lines (peak: VmHWM), and "t metrics RANK
# rows bytes" for each server's table 0. Stops the launch if memory runs short.
sample() {
  local launch=$1 samples=$2 log=$3 t0
  set +e +o pipefail  # a sample that fails (a process gone, no metrics yet) is skipped
  t0=$(now)
  while kill -0 "$launch" 2>/dev/null; do
    local t
    t=$(awk -v a="$(now)" -v b="$t0" 'BEGIN {printf "%.1f", a - b}')
    ps -e -o pid=,ppid=,args= | awk -v root="$launch" '
      { pid[NR] = $1; parent[$1] = $2; line[$1] = $0 }
      END {
        for (i = 1; i <= NR; i++) {
          p = pid[i]; q = p
          while (q in parent && q != root && q > 1) q = parent[q]
          if (q != root || p == root) continue
          role = ""
          if (line[p] ~ / server( |$)/) role = "server"
          if (line[p] ~ / worker( |$)/) role = "worker"
          if (line[p] ~ / scheduler( |$)/) role = "scheduler"
          if (role != "") print p, role
        }
      }' | while read -r pid role; do
        # VmHWM: the process's peak resident set so far, not only now.
        awk -v t="$t" -v p="$pid" -v r="$role" '/^VmHWM/ {hwm = $2} /^VmRSS/ {rss = $2}
          END {if (hwm != "") print t, p, r, hwm, rss}' "/proc/$pid/status" 2>/dev/null || true
      done >>"$samples"
    grep -o 'server [0-9]* *http://[0-9.:]*/metrics' "$log" 2>/dev/null | sort -u |
      while read -r _ rank url; do
        curl -s -m 2 "$url" 2>/dev/null | awk -v t="$t" -v r="$rank" '
          /^keel_server_table_rows\{table="0"\}/ {rows = $2}
          /^keel_server_table_memory_bytes\{table="0"\}/ {bytes = $2}
          END {if (rows != "") print t, "metrics", r, rows, bytes}' >>"$samples" || true
      done
    local available
    available=$(awk '/MemAvailable/ {printf "%d", $2 / 1048576}' /proc/meminfo)
    if ((available < min_available_gb)); then
      echo "$(now) available memory ${available} GB < ${min_available_gb} GB: stopping the job" |
        tee -a "$work/stopped" >&2
      kill -INT "$launch" 2>/dev/null || true
    fi
    sleep 1
  done
}

# Runs one launch with the generator feeding it; NAME's output in $work/NAME.*.
run_phase() {
  local name=$1
  shift
  rm -f "$work/train.fifo"
  mkfifo "$work/train.fifo"
  generate &
  local generator=$!
  tracked "$generator"
  local begin
  begin=$(now)
  nice -n 5 "$keel" launch "${job[@]}" --model_dir="$work/model-$name" \
    --log_dir="$work/logs-$name" --event_log="$work/events-$name.jsonl" "$@" \
    >"$work/$name.out" 2>&1 &
  local launch=$!
  tracked "$launch"
  sample "$launch" "$work/$name.samples" "$work/$name.out" &
  local sampler=$!
  tracked "$sampler"
  local code=0
  wait "$launch" || code=$?
  wait "$sampler" || true
  kill "$generator" 2>/dev/null || true
  wait "$generator" 2>/dev/null || true
  echo "$name: exit status $code, $(awk -v a="$(now)" -v b="$begin" 'BEGIN {printf "%.1f", a - b}') s"
  if [ "$code" != 0 ] || [ -e "$work/stopped" ]; then
    tail -20 "$work/$name.out" >&2
    exit 1
  fi
}

# Peak RSS of each role process, and the table's figures at its largest.
report_phase() {
  local name=$1
  awk -v keys="$keys" '
    $2 == "metrics" {
      if ($4 > rows[$3]) {rows[$3] = $4; bytes[$3] = $5}
      next
    }
    { if ($4 > peak[$2]) {peak[$2] = $4; role[$2] = $3} }
    END {
      for (r in rows) {
        printf "  server %s: table 0 at its largest %d rows, %.0f MB: %.2f bytes a key (bound 16: %.2fx)\n",
          r, rows[r], bytes[r] / 1e6, bytes[r] / rows[r], bytes[r] / rows[r] / 16
        total_rows += rows[r]
      }
      for (p in peak) {
        printf "  %s (pid %s): peak RSS (VmHWM) %.0f MB\n", role[p], p, peak[p] / 1024
        if (role[p] == "server") {servers++; server_peak += peak[p]}
      }
      if (total_rows > 0)
        printf "  servers: %d rows at most in all, peak RSS %.2f bytes a key (sum of the %d servers peaks over %d keys)\n",
          total_rows, server_peak * 1024 / keys, servers, keys
    }' "$work/$name.samples"
}

# The servers' own log lines of the checkpoint and the restore: GB/s per server.
report_logs() {
  local name=$1
  set +o pipefail  # a phase without some of these lines prints none
  grep -h -o 'checkpoint [^ ]*: copied [0-9]* rows in [0-9.e-]* s' "$work/logs-$name"/*server* 2>/dev/null |
    awk '{printf "  copy for the snapshot: %d rows in %.2f s\n", $4, $7}'
  grep -h -o 'wrote [0-9]* rows ([0-9]* bytes) to [^ ]* in [0-9.e-]* s' "$work/logs-$name"/*server* 2>/dev/null |
    awk '{gsub(/\(/, "", $4); printf "  snapshot written: %d rows, %.3f GB in %.2f s: %.3f GB/s\n", $2, $4 / 1e9, $(NF - 1), $4 / 1e9 / $(NF - 1)}'
  grep -h -o 'loaded [0-9]* rows of [0-9]* snapshot file(s) in [0-9.e-]* s' "$work/logs-$name"/*server* 2>/dev/null |
    awk '{printf "  restored: %d rows (%.3f GB of rows) from %d file(s) in %.2f s: %.3f GB/s\n", $2, $2 * 16 / 1e9, $5, $(NF - 1), $2 * 16 / 1e9 / $(NF - 1)}'
}

echo "large tables: $keys keys, $rows rows of $nnz features, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
run_phase train --servers=4 --workers=1 --epochs=1 --faults="drain:server:3@$drain_at"
report_phase train
report_logs train
du -sb "$work/ckpt"/ckpt-* | awk '{printf "  checkpoint %s: %.3f GB\n", $2, $1 / 1e9}'

# The drain: from the scheduler's "is drained" to the last range's "moved off
# server 3"; the rows it moved: server 3's table at its largest (it grows
# until its ranges leave, and each row it has then moves).
scheduler_log=$(ls "$work/logs-train"/*scheduler*.log | head -1)
drain_begin=$(glog_time "$scheduler_log" 'server 3 is drained')
drain_end=$(glog_time_last "$scheduler_log" 'moved off server 3')
drained_rows=$(awk '$2 == "metrics" && $3 == 3 && $4 > rows {rows = $4} END {print rows + 0}' \
  "$work/train.samples")
grep -h -E 'server 3 is drained|moved off server 3' "$scheduler_log" | cut -c1-160
awk -v a="$drain_begin" -v b="$drain_end" -v rows="$drained_rows" 'BEGIN {
  if (a == "" || b == "") {print "  drain: not seen in the scheduler log"; exit}
  gb = rows * 16 / 1e9
  printf "  drain of server 3: %d rows (%.3f GB of keys and rows) moved in %.2f s: %.1f s per GB\n",
    rows, gb, b - a, (b - a) / gb
}'

run_phase resume --servers=5 --workers=1 --epochs=1 --resume=latest
report_phase resume
report_logs resume
# The resumed job trained nothing: its model, dumped from the 5 servers that
# restored the checkpoint, is the model the 3 that wrote it held.
if cmp -s "$work/model-train/weights.bin" "$work/model-resume/weights.bin"; then
  echo "  the resumed job's model is the trained job's, byte for byte ($(stat -c %s "$work/model-train/weights.bin") bytes)"
else
  echo "  the resumed job's model differs from the trained job's" >&2
  exit 1
fi
