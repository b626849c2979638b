#!/usr/bin/env bash
# Soak: one exact_sum job of at least MINUTES minutes (3 servers with one
# backup per key range, 2 workers) with a fault every minute, while every
# role's resident memory and open descriptors are sampled; then the slope of
# each after warm-up, and the job's check (no silent loss).
#
#   scripts/experiments/soak.sh [MINUTES]      (default 60)
#
# The faults, one a minute in turn: worker 1 restarted; server 1 or 2 stopped
# past the heartbeat timeout (it leaves, then rejoins and copies its ranges
# back); server 1 or 2 killed and started again 2 s later; worker 1 stopped
# past the timeout, or every 20 minutes the scheduler restarted. One at a
# time, each over before the next: no key range loses every replica, so every
# wrong sum is a violation. Server 0 and worker 0 are never hit: their
# processes live through the whole job, and their slopes are the leak test.
#
# The workers pace their pushes (--exact_sum_push_interval_ms) so that the job
# lasts MINUTES and its sums stay exact (below 2^24).
#
# Writes to OUT (default /tmp/keel-soak): launch.log, events.jsonl,
# membership.jsonl, model/exact_sum.json, samples.tsv (every SAMPLE_S seconds,
# default 10: time, role, rank, pid, RSS kB, open descriptors), soak.md (the
# slopes and the verdict) and soak.svg (RSS and descriptors over time).
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
minutes="${1:-60}"
[[ "$minutes" =~ ^[0-9]+$ && "$minutes" -ge 5 ]] || { echo "soak.sh: MINUTES is an integer >= 5" >&2; exit 2; }
out="${OUT:-/tmp/keel-soak}"
sample_s="${SAMPLE_S:-10}"
rm -rf "$out"; mkdir -p "$out"
keel="$out/keel"
cp "$(keel_binary)" "$keel"  # a rebuild meanwhile does not change it

# 2 workers x 12 epochs x MB pushes, MB such that one push every 25 ms lasts MINUTES.
interval_ms=25
epochs=12
minibatches=$(( (minutes * 60 * 1000 / interval_ms + epochs - 1) / epochs ))
faults=""
for ((m = 1; m < minutes; m++)); do
  t=$((m * 60))
  server=$((1 + (m / 4) % 2))  # 1 or 2: server 0 and worker 0 live through the whole job
  case $((m % 4)) in
    1) item="restart:worker:1@${t}s" ;;
    2) item="stop:server:$server@${t}s+3s" ;;
    3) item="kill:server:$server@${t}s,restart:server:$server@$((t + 2))s" ;;
    0) item="stop:worker:1@${t}s+3s"
       [ $((m % 20)) -eq 0 ] && item="restart:scheduler@${t}s" ;;
  esac
  faults+="${faults:+,}$item"
done
echo "$faults" > "$out/faults"

track_processes
"$keel" launch --servers=3 --workers=2 --replication=1 --job=exact_sum --epochs="$epochs" \
  --exact_sum_minibatches="$minibatches" --exact_sum_push_interval_ms="$interval_ms" \
  --heartbeat_interval=0.25 --heartbeat_timeout=2 --model_dir="$out/model" \
  --membership_log="$out/membership.jsonl" --event_log="$out/events.jsonl" \
  --faults="$faults" --timeout=$((minutes * 60 * 2 + 600)) --progress=lines \
  > "$out/launch.log" 2>&1 &
launch=$!
tracked "$launch"
echo "soak: $minutes min, $minibatches pushes per worker and epoch, launch pid $launch; $out"

# The processes of the job: the launch's descendants that run the keel binary.
descendants() {
  local pid
  for pid in $(pgrep -P "$1" 2>/dev/null || true); do
    echo "$pid"
    descendants "$pid"
  done
}
printf 'time\trole\trank\tpid\trss_kb\tfds\n' > "$out/samples.tsv"
start=$(now)
while kill -0 "$launch" 2>/dev/null; do
  t=$(echo "$(now) - $start" | bc)
  for pid in $(descendants "$launch"); do
    cmdline=$( { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null) || continue  # gone meanwhile
    role=$(echo "$cmdline" | grep -oE ' (scheduler|server|worker) ' | head -1 | tr -d ' ') || true
    [ -n "$role" ] || continue
    [[ "$cmdline" == *"$keel"* ]] || continue
    rank=$(echo "$cmdline" | grep -oE -- '--rank=[0-9]+' | head -1 | cut -d= -f2) || true
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || continue
    fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$role" "${rank:--}" "$pid" "${rss:-0}" "$fds" \
      >> "$out/samples.tsv"
  done
  sleep "$sample_s"
done
code=0
wait "$launch" || code=$?
echo "$code" > "$out/code"
python3 scripts/experiments/soak_report.py "$out" "$minutes"
