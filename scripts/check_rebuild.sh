#!/usr/bin/env bash
# Checks that setting up again rebuilds nothing: run after scripts/test.sh
# (or after the demo), it configures build/ as the demo does and as the tests
# do, builds each time, and fails if any of those builds compiled or linked
# anything. CI runs it (.ci/run) after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
failed=0
# Its set-ups' own steps are not stages of the caller's (.ci/run's) times.
unset KEEL_STEP_TIMES
for setup in "scripts/setup.sh" "scripts/setup.sh --tests" "scripts/setup.sh"; do
  log=$(mktemp)
  $setup >"$log" 2>&1 || { cat "$log"; echo "check_rebuild: '$setup' failed"; exit 1; }
  built=$(grep -E "Building|Linking|Generating|Re-running CMake" "$log" | grep -v "Re-checking" || true)
  if [ -n "$built" ]; then
    echo "check_rebuild: '$setup' after the last set-up rebuilt:"
    echo "$built" | head -20
    failed=1
  else
    echo "check_rebuild: '$setup' configured build/ again and built nothing"
  fi
  rm -f "$log"
done
exit "$failed"
