#!/usr/bin/env bash
# Configures and builds the clang tree, build-clang/: clang++, CUDA off,
# AddressSanitizer + UndefinedBehaviorSanitizer (every report fatal) and the
# libFuzzer targets of tests/fuzz (KEEL_FUZZ=ON). scripts/fuzz.sh and the
# sanitizer stage of scripts/test.sh build with it. It builds the targets in
# KEEL_CLANG_TARGETS (default: the unit and cluster tests and the fuzz
# targets, what the sanitizer stage runs; "all" for every one). Extra arguments go to
# cmake's configure step (for example -DKEEL_SANITIZE=thread -DKEEL_FUZZ=OFF
# with KEEL_CLANG_TREE=build-tsan for a ThreadSanitizer tree).
set -euo pipefail
cd "$(dirname "$0")/.."
tree=${KEEL_CLANG_TREE:-build-clang}
# KEEL_WERROR (CI sets it) only when given: a tree keeps its setting otherwise
# (scripts/configure.sh, which also compiles through ccache when installed).
KEEL_ENABLE_CUDA=OFF scripts/configure.sh "$tree" -DCMAKE_CXX_COMPILER=clang++ -DKEEL_FUZZ=ON "$@"
read -r -a targets <<<"${KEEL_CLANG_TARGETS:-keel_unit_tests keel_cluster_tests keel_fuzz_targets}"
cmake --build "$tree" -j "$(nproc)" --target "${targets[@]}"
