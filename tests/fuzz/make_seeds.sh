#!/usr/bin/env bash
# Rewrites the binary seeds of tests/fuzz/corpus (message, snapshot,
# model_artifact, recordio_reader) with the code's own writers, through
# keel_fuzz_seeds of the clang tree (scripts/sanitize_build.sh builds it).
# Run it after a change to one of those formats, and commit the result.
set -euo pipefail
cd "$(dirname "$0")/../.."
"${KEEL_CLANG_TREE:-build-clang}/tests/fuzz/keel_fuzz_seeds" tests/fuzz/corpus
