#!/usr/bin/env bash
# Installs Keel's build dependencies from Debian's packages (only those
# missing), the S3 test server and the Kubernetes schema check (Node, and
# scripts/s3rver's and scripts/k8s-schema's npm packages, only when missing:
# no network needed the second time), and builds into build/.
# Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config libzmq3-dev cppzmq-dev libprotobuf-dev
          protobuf-compiler libeigen3-dev libgflags-dev libgoogle-glog-dev libgtest-dev
          libcurl4-openssl-dev libssl-dev
          # The multihost tests: hosts as network namespaces, a real sshd, a real
          # Slurm, the Kubernetes manifests (they start and stop the daemons).
          iproute2 iptables openssh-client openssh-server slurm-wlm munge yamllint
          python3 python3-yaml
          # The benchmarks' LIBLINEAR (scripts/bench/train.sh, defaults.sh).
          liblinear-tools
          # The clang tree: sanitizers and libFuzzer (scripts/sanitize_build.sh).
          clang libclang-rt-14-dev
          # Observability: the metrics registry, the HTTP layer, a real Prometheus
          # server and promtool for the tests, a real browser for page and report tests.
          prometheus-cpp-dev libcpp-httplib-dev prometheus chromium-headless-shell
          # scripts/bench/prior_bound.sh's softmax bound (multiclass set).
          python3-sklearn
          # keel serve's tests (a real HTTP client) and its load benchmark
          # (scripts/bench/serve.sh).
          curl wrk)
missing=()
# Node runs the S3 test server; a Node from elsewhere (with its own npm) will do.
if ! command -v node >/dev/null 2>&1; then
  packages+=(nodejs npm)
elif ! command -v npm >/dev/null 2>&1; then
  packages+=(npm)
fi
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
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
  "${sudo_cmd[@]}" apt-get install -y -q "${missing[@]}" \
    || { "${sudo_cmd[@]}" apt-get update -q && "${sudo_cmd[@]}" apt-get install -y -q "${missing[@]}"; }
fi

# The S3-protocol server the storage tests run on loopback (scripts/s3rver).
if [ ! -f scripts/s3rver/node_modules/@20minutes/s3rver/package.json ]; then
  echo "setup: installing the S3 test server (npm ci in scripts/s3rver)"
  (cd scripts/s3rver && npm ci --no-audit --no-fund --loglevel=error)
fi

# The Kubernetes API's schemas the manifest test checks deploy/kubernetes
# against, offline (scripts/k8s-schema: kubernetes-models and a YAML parser).
if [ ! -f scripts/k8s-schema/node_modules/kubernetes-models/package.json ]; then
  echo "setup: installing the Kubernetes schema check (npm ci in scripts/k8s-schema)"
  (cd scripts/k8s-schema && npm ci --no-audit --no-fund --loglevel=error)
fi

# The CUDA backend is built when nvcc is found; CUDA lives here on these machines.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

# KEEL_WERROR=ON (CI sets it) makes the C++ compiler's warnings errors.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKEEL_WERROR="${KEEL_WERROR:-OFF}" >/dev/null
cmake --build build -j "$(nproc)"
