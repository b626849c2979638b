#!/usr/bin/env bash
# Sets Keel up on Debian 12 and builds it into build/. Safe to run again: it
# installs only the packages that are missing and rebuilds only what changed.
#
#   scripts/setup.sh [--tests] [--package] [--container] [--install-only] [TARGET...]
#
# Without --tests: the packages that building and running `keel` need (the
# compiler, CMake, Ninja, ccache and the libraries), and the build of TARGET
# (default: keel and what it links). With --tests (scripts/test.sh): also
# what the tests need (GoogleTest, sshd, Slurm, Prometheus, a browser, clang
# and its sanitizers, the S3 test server's and the Kubernetes schema check's
# npm packages), and the build of every target unless TARGETs are given.
# --package: also what scripts/package.sh needs (help2man, dpkg-dev);
# --container: also what scripts/container/build_image.sh needs (podman, runc,
# mmdebstrap; --tests includes both); --install-only: the packages alone, no build.
#
# The tree is configured the same way by every script, so that one after the
# other rebuilds nothing (KEEL_WERROR and the CUDA backend are kept as the
# tree has them unless KEEL_WERROR or KEEL_ENABLE_CUDA is set). Objects are
# cached by ccache in its own folder (~/.cache/ccache), which outlives the
# tree: a new clone on the same machine compiles only what changed.
# KEEL_SETUP_QUIET=1 prints one line a step (scripts/demo.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/steps.sh

tests=0 package=0 container=0 build=1
while [ $# -gt 0 ]; do
  case $1 in
    --tests) tests=1 package=1 container=1 ;;
    --package) package=1 ;;
    --container) package=1 container=1 ;;
    --install-only) build=0 ;;
    *) break ;;
  esac
  shift
done
targets=("$@")

packages=(build-essential cmake ninja-build ccache pkg-config libzmq3-dev cppzmq-dev
          libprotobuf-dev protobuf-compiler libeigen3-dev libgflags-dev libgoogle-glog-dev
          libcurl4-openssl-dev libssl-dev prometheus-cpp-dev libmicrohttpd-dev zlib1g-dev)
if [ "$tests" = 1 ]; then
  packages+=(libgtest-dev
             # The tests' HTTP client (tests/scrape.cc).
             libcpp-httplib-dev
             # The multihost tests: hosts as network namespaces, a real sshd, a real
             # Slurm, the Kubernetes manifests (they start and stop the daemons).
             iproute2 iptables openssh-client openssh-server slurm-wlm munge yamllint
             python3 python3-yaml
             # The benchmarks' LIBLINEAR (scripts/bench/train.sh, defaults.sh).
             liblinear-tools
             # The clang tree: sanitizers and libFuzzer (scripts/sanitize_build.sh).
             clang libclang-rt-14-dev
             # A real Prometheus server and promtool, a real browser for page and
             # report tests.
             prometheus chromium-headless-shell
             # scripts/bench/prior_bound.sh's softmax bound (multiclass set).
             python3-sklearn
             # The suite on a loaded machine (scripts/experiments/loaded_suite.sh).
             stress-ng
             # scripts/bench/real_data.sh's real data sets (with python3-sklearn's).
             python3-statsmodels
             # keel serve's tests (a real HTTP client) and its load benchmark.
             curl wrk)
  # Node runs the S3 test server; a Node from elsewhere (with its own npm) will do.
  if ! command -v node >/dev/null 2>&1; then
    packages+=(nodejs npm)
  elif ! command -v npm >/dev/null 2>&1; then
    packages+=(npm)
  fi
fi
if [ "$container" = 1 ]; then
  # The image (scripts/container/build_image.sh, tests/container): its base
  # made from Debian's packages, built and run with Debian's podman on runc
  # (deploy/container/containers.conf says why not crun). mmdebstrap also
  # makes the throwaway Debian root tests/package installs the package into.
  packages+=(mmdebstrap podman runc)
fi
if [ "$package" = 1 ]; then
  # The package (scripts/package.sh): its man page from --help, its
  # dependencies read off the binary (dpkg-shlibdeps).
  packages+=(help2man dpkg-dev)
fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  step "installing ${#missing[@]} Debian package(s): ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  # Installing sshd, munge and Slurm must not start or enable their services:
  # only the tests run them. policy-rc.d says no to every service start.
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee "$policy" >/dev/null
    "${sudo_cmd[@]}" chmod 755 "$policy"
    trap '"${sudo_cmd[@]}" rm -f "$policy"' EXIT
  fi
  # The build's packages without what they only recommend; the tests' with it,
  # as they have always been tested.
  recommends=()
  [ "$tests" = 1 ] || recommends=(--no-install-recommends)
  install=("${sudo_cmd[@]}" apt-get install -y -q "${recommends[@]}" "${missing[@]}")
  # A machine whose package lists are missing or stale (a new root has none)
  # reads them first; the failed attempt says nothing.
  "${install[@]}" >/dev/null 2>&1 \
    || { quiet "${sudo_cmd[@]}" apt-get update -q && quiet "${install[@]}"; }
  step_done
fi

if [ "$tests" = 1 ]; then
  # The S3-protocol server the storage tests run on loopback (scripts/s3rver).
  if [ ! -f scripts/s3rver/node_modules/@20minutes/s3rver/package.json ]; then
    step "installing the S3 test server (npm ci in scripts/s3rver)"
    (cd scripts/s3rver && quiet npm ci --no-audit --no-fund --loglevel=error)
    step_done
  fi
  # The Kubernetes API's schemas the manifest test checks deploy/kubernetes
  # against, offline (scripts/k8s-schema: kubernetes-models and a YAML parser).
  if [ ! -f scripts/k8s-schema/node_modules/kubernetes-models/package.json ]; then
    step "installing the Kubernetes schema check (npm ci in scripts/k8s-schema)"
    (cd scripts/k8s-schema && quiet npm ci --no-audit --no-fund --loglevel=error)
    step_done
  fi
fi

[ "$build" = 1 ] || exit 0
# A full disk makes a compiler fail with little or no message (an nvcc killed
# mid-write says nothing), so a short disk is named before building: the build
# trees, their temporaries and ccache's folder together take about 4 GB with
# the tests' trees, 1.5 GB for keel alone.
need_mb=$([ "$tests" = 1 ] && echo 4096 || echo 1536)
for dir in . "${TMPDIR:-/tmp}" "${CCACHE_DIR:-$HOME/.cache}"; do
  [ -d "$dir" ] || continue
  free_mb=$(df -Pm "$dir" | awk 'NR == 2 { print $4 }')
  if [ -n "$free_mb" ] && [ "$free_mb" -lt "$need_mb" ]; then
    echo "$keel_step_script: warning: $(realpath "$dir") has $free_mb MB free;" \
         "building may need $need_mb MB and fail for want of space" >&2
  fi
done
step "configuring build/"
scripts/configure.sh build $([ "$tests" = 1 ] && echo -DKEEL_BUILD_TESTS=ON)
step_done

if [ ${#targets[@]} -eq 0 ] && [ "$tests" = 0 ]; then targets=(keel); fi
step "building ${targets[*]:-every target} in build/"
build_options=()
[ ${#targets[@]} -eq 0 ] || build_options=(--target "${targets[@]}")
quiet cmake --build build -j "$(nproc)" "${build_options[@]}"
step_done
