#!/usr/bin/env bash
# The suite on a loaded machine: CI's command (.ci/run) on a fresh clone of
# this repository's HEAD, beside `stress-ng --cpu N` (N = the machine's cores:
# every core busy with another process the whole time), RUNS times in turn.
# Each run's exit status, wall time and the load averages sampled every
# SAMPLE_S seconds (default 30) go to OUT (default /tmp/keel-loaded-suite):
# run-K.log (.ci/run's output), load-K.tsv, and summary.md.
#
#   scripts/experiments/loaded_suite.sh [RUNS]      (default 2)
#
# stress-ng comes from Debian (scripts/setup.sh --tests installs it). Every
# process started here is stopped by PID at the end, however the run ends.
set -euo pipefail
runs="${1:-2}"
[[ "$runs" =~ ^[0-9]+$ && "$runs" -ge 1 ]] || { echo "loaded_suite.sh: RUNS is an integer >= 1" >&2; exit 2; }
out="${OUT:-/tmp/keel-loaded-suite}"
sample_s="${SAMPLE_S:-30}"
repo=$(cd "$(dirname "$0")/../.." && pwd)
command -v stress-ng >/dev/null 2>&1 || {
  echo "loaded_suite.sh: stress-ng not found; run scripts/setup.sh --tests" >&2
  exit 1
}
cores=$(nproc)
mkdir -p "$out"
stress_pid="" sampler_pid=""
stop_helpers() {
  [ -z "$stress_pid" ] || kill "$stress_pid" 2>/dev/null || true
  [ -z "$sampler_pid" ] || kill "$sampler_pid" 2>/dev/null || true
  [ -z "$stress_pid" ] || wait "$stress_pid" 2>/dev/null || true
  stress_pid="" sampler_pid=""
}
trap stop_helpers EXIT
{
  echo "# .ci/run beside stress-ng --cpu $cores ($(git -C "$repo" rev-parse --short HEAD), $(date -u +%F))"
  echo
  echo "| run | exit | minutes | load average (1 min): median, highest |"
  echo "| --- | --- | --- | --- |"
} >"$out/summary.md"
failed=0
for run in $(seq 1 "$runs"); do
  clone="$out/clone-$run"
  rm -rf "$clone"
  git clone -q "$repo" "$clone"
  stress-ng --cpu "$cores" --quiet &
  stress_pid=$!
  (while true; do
     printf '%s\t%s\n' "$(date +%s)" "$(cut -d' ' -f1-3 /proc/loadavg)"
     sleep "$sample_s"
   done) >"$out/load-$run.tsv" &
  sampler_pid=$!
  start=$(date +%s)
  status=0
  "$clone/.ci/run" >"$out/run-$run.log" 2>&1 || status=$?
  minutes=$(( ($(date +%s) - start + 30) / 60 ))
  stop_helpers
  load=$(awk -F'\t' '{ split($2, l, " "); print l[1] }' "$out/load-$run.tsv" | sort -n |
           awk '{ v[NR] = $1 } END { if (NR) printf "%s, %s", v[int((NR + 1) / 2)], v[NR] }')
  echo "| $run | $status | $minutes | $load |" >>"$out/summary.md"
  echo "loaded_suite.sh: run $run of $runs: exit $status in $minutes min (load $load)"
  [ "$status" -eq 0 ] || failed=1
  rm -rf "$clone"
done
cat "$out/summary.md"
exit "$failed"
