#!/usr/bin/env bash
# Runs one libFuzzer target: run_fuzzer.sh BINARY SECONDS SEEDS WORKDIR.
# New inputs go to WORKDIR/corpus (the committed SEEDS folder is only read),
# a crashing input to WORKDIR/artifacts/, the output to WORKDIR/log. Prints
# one line, "TARGET: N executions in S s, C crashes, coverage V (last grew at
# P% of the run) [ARTIFACT]", and exits non-zero if the target crashed,
# leaked, hung or allocated past its limit. V is libFuzzer's `cov:` (edges
# covered) at the end; P the share of the executions done when it last grew.
set -uo pipefail
binary=$1 seconds=$2 seeds=$3 workdir=$4
name=$(basename "$binary")
rm -rf "$workdir/artifacts"
mkdir -p "$workdir/corpus" "$workdir/artifacts"
"$binary" -max_total_time="$seconds" -print_final_stats=1 -timeout=20 -rss_limit_mb=2048 \
  -artifact_prefix="$workdir/artifacts/" "$workdir/corpus" "$seeds" >"$workdir/log" 2>&1
status=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$workdir/log" | tail -1)
# The last line where `cov:` rose, as a share of the run's executions.
read -r coverage grew_at < <(awk -v runs="${runs:-0}" '
  /^#[0-9]+\t/ && / cov: / {
    executions = substr($1, 2) + 0
    for (i = 1; i < NF; i++) if ($i == "cov:") value = $(i + 1) + 0
    if (value > best) { best = value; last = executions }
  }
  END { printf "%d %d\n", best, (runs > 0 ? 100 * last / runs : 0) }' "$workdir/log")
artifacts=$(ls "$workdir/artifacts")
crashes=$(ls "$workdir/artifacts" | wc -l)
echo "$name: ${runs:-?} executions in $seconds s, $crashes crashes, coverage $coverage (last grew at $grew_at% of the run)${artifacts:+ ($workdir/artifacts/$artifacts)}"
if [ "$status" -ne 0 ]; then
  echo "$name: exit status $status; the end of $workdir/log:"
  grep -v '^#' "$workdir/log" | tail -40
fi
exit "$status"
