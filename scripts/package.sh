#!/usr/bin/env bash
# Builds the Debian package, build-package/keel_<version>_amd64.deb: a CPU
# build (CUDA off) in its own tree, build-package/, with the binary, keel(1),
# bash completion, the configs as examples and the README (see the top
# CMakeLists.txt), its dependencies read off the binary by dpkg-shlibdeps.
# Prints the package's path, size and files.
#
# KEEL_ENABLE_CUDA=ON builds the CUDA variant instead (tree build-package-cuda/):
# the same package with the CUDA backend, which needs the CUDA toolkit's
# cuBLAS on the machine that runs --device=cuda (docs/guide/operations.md,
# "Installing the package").
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/steps.sh
export KEEL_SETUP_QUIET=${KEEL_SETUP_QUIET:-1}
scripts/setup.sh --package --install-only
cuda=${KEEL_ENABLE_CUDA:-OFF}
tree=build-package
[ "$cuda" = OFF ] || tree=build-package-cuda
step "configuring $tree/ (CUDA $cuda, no tests)"
KEEL_ENABLE_CUDA=$cuda scripts/configure.sh "$tree" -DKEEL_BUILD_TESTS=OFF
step_done
step "building keel, its man page and its completion in $tree/"
quiet cmake --build "$tree" -j "$(nproc)"
step_done
step "packing $tree/keel_*.deb (cpack -G DEB)"
rm -f "$tree"/keel_*.deb
quiet cpack --config "$tree/CPackConfig.cmake" -B "$tree" -G DEB
step_done
deb=$(ls "$tree"/keel_*.deb)
echo "$deb: $(du -k "$deb" | cut -f1) KiB"
dpkg-deb --field "$deb" Package Version Architecture Installed-Size Depends
dpkg-deb --contents "$deb" | awk '{print "  " $3 "\t" $6}'
