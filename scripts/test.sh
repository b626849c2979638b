#!/usr/bin/env bash
# Sets up, builds and runs every test, one at a time, the multihost ones too
# (network namespaces, sshd, Slurm: they need root and skip without it). Each
# test is its own ctest entry with a label (unit, cluster, process, storage,
# faults, multihost, gpu) and its own timeout. Extra arguments go to ctest
# (for example: scripts/test.sh -L unit, scripts/test.sh -R cluster, or
# scripts/test.sh -LE multihost to leave those out).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest --output-on-failure "$@"
