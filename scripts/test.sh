#!/usr/bin/env bash
# Sets up, builds and runs every test, the multihost ones too (network
# namespaces, sshd, Slurm: they need root and skip without it). Extra
# arguments go to ctest (for example: scripts/test.sh -R cluster, or
# scripts/test.sh -LE multihost to leave those out).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest --output-on-failure --timeout 300 "$@"
