#!/usr/bin/env bash
# Sets up, builds and runs every test, the multihost ones too (network
# namespaces, sshd, Slurm: they need root and skip without it). Each test is
# its own ctest entry with a label (unit, cluster, process, storage, faults,
# multihost, gpu, package, container) and its own timeout. Tests run as many at
# a time as the machine has cores, except the faults, multihost, package and
# container ones, which run alone (RUN_SERIAL). Extra arguments go to ctest
# (for example: scripts/test.sh -L unit, scripts/test.sh -R cluster,
# scripts/test.sh -LE multihost to leave those out, or -j1 for one test at a
# time).
#
# The set-up (scripts/setup.sh --tests) installs what the tests need beside
# what the demo's installs, in the same tree: after scripts/demo.sh it builds
# only what the demo did not.
#
# Then, when run without arguments (or with KEEL_SANITIZER_STAGE=1), the
# sanitizer stage: the clang tree build-clang/ (AddressSanitizer +
# UndefinedBehaviorSanitizer, CUDA off, the fuzz targets;
# scripts/sanitize_build.sh) runs the unit and cluster tests and each fuzz
# target for a few seconds. KEEL_SANITIZER_STAGE=0 leaves it out. That tree
# compiles while the gcc tree's tests run, at the lowest CPU priority (nice
# 19): it takes only the time the tests leave a core idle (the faults,
# multihost, package and container tests run one at a time and mostly wait),
# so a test's process is not kept from a core by it. Its output goes to a log,
# printed if it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/steps.sh
scripts/setup.sh --tests
jobs=$(nproc)
stage=${KEEL_SANITIZER_STAGE:-$([ $# -eq 0 ] && echo 1 || echo 0)}
clang_pid=""
clang_log=""
stop_clang_build() {
  # The build in its own session (setsid): stop it with everything it started.
  [ -z "$clang_pid" ] || kill -- "-$clang_pid" 2>/dev/null || true
  [ -z "$clang_log" ] || rm -f "$clang_log"
}
if [ "$stage" = 1 ]; then
  clang_log=$(mktemp "${TMPDIR:-/tmp}/keel-clang-build.XXXXXX")
  trap stop_clang_build EXIT
  echo "$keel_step_script: building the sanitizer tree build-clang/ beside the tests (nice 19)"
  setsid nice -n 19 scripts/sanitize_build.sh >"$clang_log" 2>&1 &
  clang_pid=$!
fi
step "running the tests in build/ (ctest $*)"
(cd build && ctest --output-on-failure --parallel "$jobs" "$@")
step_done

if [ "$stage" = 1 ]; then
  step "finishing the sanitizer tree build-clang/ (ASan+UBSan, clang)"
  status=0
  wait "$clang_pid" || status=$?
  clang_pid=""
  if [ "$status" != 0 ]; then
    cat "$clang_log" >&2
    echo "$keel_step_script: building build-clang/ failed ($status)" >&2
    exit "$status"
  fi
  step_done
  step "running the unit, cluster and fuzz tests in build-clang/"
  (cd build-clang && ctest --output-on-failure --parallel "$jobs" -L 'unit|cluster|fuzz')
  step_done
fi
