#!/usr/bin/env bash
# Builds the clang tree (scripts/sanitize_build.sh) and runs every libFuzzer
# target of tests/fuzz for SECONDS each (default 120), one after another,
# from its seed corpus in tests/fuzz/corpus/<target>/. A target whose
# coverage still grew in the last quarter of its run runs again for SECONDS
# from the corpus it grew (up to KEEL_FUZZ_ROUNDS runs in all, default 4).
# Prints each target's executions, time, coverage and crashes; a crashing
# input is kept under build-clang/fuzz-runs/<target>/artifacts/ (reproduce:
# run the target on it). Exits non-zero if any target crashed.
#   scripts/fuzz.sh [SECONDS] [TARGET...]   e.g. scripts/fuzz.sh 30 snapshot message
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
shift || true
KEEL_CLANG_TARGETS=keel_fuzz_targets scripts/sanitize_build.sh || exit 1
tree=${KEEL_CLANG_TREE:-build-clang}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for binary in "$tree"/tests/fuzz/fuzz_*; do targets+=("$(basename "$binary" | sed 's/^fuzz_//')"); done
fi
failed=0
summary=()
rounds=${KEEL_FUZZ_ROUNDS:-4}
for target in "${targets[@]}"; do
  executions=0 spent=0 crashed=0 ran=0
  for ((round = 1; round <= rounds; ++round)); do
    ran=$round
    line=$(tests/fuzz/run_fuzzer.sh "$tree/tests/fuzz/fuzz_$target" "$seconds" \
      "tests/fuzz/corpus/$target" "$tree/fuzz-runs/$target") || crashed=1
    echo "$line"
    first=$(echo "$line" | head -1)
    executions=$((executions + $(echo "$first" | sed -n 's/^[^:]*: \([0-9]*\) executions.*/\1/p')))
    spent=$((spent + seconds))
    grew_at=$(echo "$first" | sed -n 's/.*last grew at \([0-9]*\)% .*/\1/p')
    coverage=$(echo "$first" | sed -n 's/.*coverage \([0-9]*\) .*/\1/p')
    # Settled: no new coverage in the run's last quarter.
    [ "$crashed" = 0 ] && [ "${grew_at:-0}" -ge 75 ] || break
  done
  [ "$crashed" = 0 ] || failed=1
  summary+=("fuzz_$target: $executions executions in $spent s ($ran run(s)), coverage $coverage, last grew at $grew_at% of the last run, $([ "$crashed" = 0 ] && echo 0 || echo 1) crashing run(s)")
done
echo
echo "fuzz.sh: $seconds s per run, up to $rounds runs per target"
printf '  %s\n' "${summary[@]}"
exit "$failed"
