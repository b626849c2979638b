#!/usr/bin/env bash
# Builds the clang tree (scripts/sanitize_build.sh) and runs every libFuzzer
# target of tests/fuzz for SECONDS each (default 120), one after another,
# from its seed corpus in tests/fuzz/corpus/<target>/. Prints each target's
# executions and crashes; a crashing input is kept under
# build-clang/fuzz-runs/<target>/artifacts/ (reproduce: run the target on it).
# Exits non-zero if any target crashed.
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
for target in "${targets[@]}"; do
  line=$(tests/fuzz/run_fuzzer.sh "$tree/tests/fuzz/fuzz_$target" "$seconds" \
    "tests/fuzz/corpus/$target" "$tree/fuzz-runs/$target") || failed=1
  echo "$line"
  summary+=("$(echo "$line" | head -1)")
done
echo
echo "fuzz.sh: $seconds s per target"
printf '  %s\n' "${summary[@]}"
exit "$failed"
