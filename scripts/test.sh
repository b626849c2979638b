#!/usr/bin/env bash
# Sets up, builds and runs every test, the multihost ones too (network
# namespaces, sshd, Slurm: they need root and skip without it). Each test is
# its own ctest entry with a label (unit, cluster, process, storage, faults,
# multihost, gpu) and its own timeout. Tests run as many at a time as the
# machine has cores, except the faults and multihost ones, which run alone
# (RUN_SERIAL). Extra arguments go to ctest (for example: scripts/test.sh -L
# unit, scripts/test.sh -R cluster, scripts/test.sh -LE multihost to leave
# those out, or -j1 for one test at a time).
#
# Then, when run without arguments (or with KEEL_SANITIZER_STAGE=1), the
# sanitizer stage: the clang tree build-clang/ (AddressSanitizer +
# UndefinedBehaviorSanitizer, CUDA off, the fuzz targets;
# scripts/sanitize_build.sh) runs the unit and cluster tests and each fuzz
# target for a few seconds. KEEL_SANITIZER_STAGE=0 leaves it out.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)
(cd build && ctest --output-on-failure --parallel "$jobs" "$@")

stage=${KEEL_SANITIZER_STAGE:-$([ $# -eq 0 ] && echo 1 || echo 0)}
if [ "$stage" = 1 ]; then
  echo "test.sh: the sanitizer stage (ASan+UBSan, build-clang/)"
  scripts/sanitize_build.sh
  (cd build-clang && ctest --output-on-failure --parallel "$jobs" -L 'unit|cluster|fuzz')
fi
