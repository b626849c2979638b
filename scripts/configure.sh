#!/usr/bin/env bash
# Configures a build tree the way every script does, so that configuring it
# again (from another script, or the same one twice) changes no target's flags
# and `cmake --build` then has nothing to do.
#
#   scripts/configure.sh TREE [CMAKE OPTION...]
#
# A new tree uses Ninja (a tree made with another generator keeps it) and, when
# ccache is installed, compiles through it with its cache in ~/.cache/ccache:
# the cache outlives the tree, so a new clone on the same machine compiles only
# what changed. KEEL_WERROR and KEEL_ENABLE_CUDA are passed on only when set
# (CI sets KEEL_WERROR=ON); otherwise the tree keeps what it has.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$1
shift
options=(-DCMAKE_BUILD_TYPE=Release)
if [ ! -f "$tree/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
  options+=(-G Ninja)
fi
if command -v ccache >/dev/null 2>&1; then
  # Precompiled headers are cached only with this sloppiness (ccache(1),
  # "Precompiled headers"). Paths under the clone are hashed relative to the
  # tree and the working directory is left out of the hash, so another clone's
  # tree finds the same objects.
  launcher="env;CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
  launcher+=";CCACHE_BASEDIR=$PWD;CCACHE_NOHASHDIR=1;ccache"
  options+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_CUDA_COMPILER_LAUNCHER="$launcher")
fi
[ -z "${KEEL_WERROR:-}" ] || options+=(-DKEEL_WERROR="$KEEL_WERROR")
[ -z "${KEEL_ENABLE_CUDA:-}" ] || options+=(-DKEEL_ENABLE_CUDA="$KEEL_ENABLE_CUDA")
# The CUDA backend is built when nvcc is found; CUDA lives here on these machines.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
cmake -S . -B "$tree" "${options[@]}" "$@" >/dev/null
