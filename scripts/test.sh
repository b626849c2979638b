#!/usr/bin/env bash
# Sets up, builds and runs every test. Extra arguments go to ctest
# (for example: scripts/test.sh -R Cluster).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest --output-on-failure --timeout 300 "$@"
