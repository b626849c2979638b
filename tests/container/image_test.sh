#!/usr/bin/env bash
# Keel's image as SageMaker runs it: scripts/container/build_image.sh builds it
# (the Debian package, the base made once per machine and kept in podman's
# store, the image), then podman runs it.
#   - `serve`, with a model folder mounted at /opt/ml/model (trained outside by
#     keel launch on keel datagen's data): /ping answers 200 on port 8080
#     (published to a free loopback port), and /invocations answers what `keel
#     predict` writes for the same records; SAGEMAKER_BIND_TO_PORT moves the port.
#   - `train`, with a contract folder mounted at /opt/ml (hyperparameters as
#     strings, one host algo-1, a File channel train): it exits 0 and model/
#     holds a model that `keel predict` scores. Skipped, saying so, only when
#     the image's `keel train --help` fails (keel train not built yet).
#   - Anything else runs as a program in the image; an unknown word is refused.
#
#   image_test.sh KEEL_BINARY
#
# Exits 77 (skipped), saying why, where no container runtime can run: without
# root (podman's store, mmdebstrap's root mode), or when podman cannot start a
# container from the base. Every wait is bounded; the containers and the
# scratch folder are removed at the end, pass or fail.
set -euo pipefail
keel=$(readlink -f "$1")
cd "$(dirname "$0")/../.."
export CONTAINERS_CONF=$PWD/deploy/container/containers.conf
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: the image needs root to build and run (podman's store, mmdebstrap's root mode)"
  exit 77
fi

start=$(date +%s)
base=localhost/keel-base:bookworm-minbase
image=localhost/keel:latest
if ! scripts/container/build_image.sh; then
  # A runtime that cannot run a container here fails the build's RUN steps;
  # say so and skip. Anything else is the image's failure.
  if command -v podman >/dev/null && podman image exists "$base"; then
    if ! error=$(timeout 120 podman run --rm "$base" true 2>&1); then
      echo "skipped: podman cannot run a container on this machine: $error"
      exit 77
    fi
  fi
  echo "FAIL: scripts/container/build_image.sh failed"
  exit 1
fi
echo "image built in $(($(date +%s) - start)) s"

work=$(mktemp -d /tmp/keel-image-test.XXXXXX)
prefix=keel-image-test-$$
cleanup() {
  for name in "$prefix-serve" "$prefix-port" "$prefix-train"; do
    podman rm --force --time 0 "$name" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

# A free TCP port on loopback (the kernel's pick; it stays free for a moment).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits up to 60 s for GET URL/ping to answer 200; prints the container's log if not.
wait_for_ping() {
  local url=$1 container=$2
  for _ in $(seq 120); do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/ping")" = 200 ]; then
      return 0
    fi
    sleep 0.5
  done
  echo "FAIL: $url/ping did not answer 200 within 60 s; $container's log:"
  podman logs "$container" 2>&1 | tail -20
  return 1
}

# The model, trained outside the image on datagen's tiny data.
"$keel" datagen --model=linear --rows=2000 --features=20 --nnz=5 --train_files=1 --seed=7 \
  --out="$work/data" >/dev/null
timeout 120 "$keel" launch --servers=1 --workers=1 --job=linear_learner \
  --predictor_type=binary_classifier --data_format=libsvm --feature_dim=20 --epochs=2 \
  --train="$work/data/train" --validation="$work/data/validation" \
  --model_dir="$work/model" --minloglevel=1 >"$work/launch.log" 2>&1 \
  || { echo "FAIL: keel launch"; tail -20 "$work/launch.log"; exit 1; }
test_files=("$work"/data/test/*)
head -50 "${test_files[0]}" >"$work/records.libsvm"
"$keel" predict --model_dir="$work/model" --data="$work/records.libsvm" \
  --out="$work/expected.json" --accept=application/json >/dev/null

# serve: 8080 in the container, published on a free loopback port.
port=$(free_port)
podman run --detach --name "$prefix-serve" --publish "127.0.0.1:$port:8080" \
  --volume "$work/model:/opt/ml/model:ro" "$image" serve >/dev/null
wait_for_ping "http://127.0.0.1:$port" "$prefix-serve"
curl -s --max-time 10 --fail-with-body -H 'Content-Type: text/libsvm' \
  -H 'Accept: application/json' --data-binary "@$work/records.libsvm" \
  "http://127.0.0.1:$port/invocations" >"$work/answer.json" \
  || { echo "FAIL: /invocations: $(cat "$work/answer.json")"; exit 1; }
if ! cmp -s "$work/expected.json" "$work/answer.json"; then
  echo "FAIL: /invocations answered other than keel predict:"
  diff "$work/expected.json" "$work/answer.json" | head -10
  exit 1
fi
echo "serve: /ping 200 and /invocations = keel predict on 50 records (port 8080 as 127.0.0.1:$port)"
podman stop --time 10 "$prefix-serve" >/dev/null

# serve on SAGEMAKER_BIND_TO_PORT.
port=$(free_port)
podman run --detach --name "$prefix-port" --publish "127.0.0.1:$port:8081" \
  --env SAGEMAKER_BIND_TO_PORT=8081 --volume "$work/model:/opt/ml/model:ro" \
  "$image" serve >/dev/null
wait_for_ping "http://127.0.0.1:$port" "$prefix-port"
echo "serve: SAGEMAKER_BIND_TO_PORT=8081 moves the port"
podman stop --time 10 "$prefix-port" >/dev/null

# Other arguments: a program in the image runs; an unknown word is refused.
version=$(timeout 60 podman run --rm "$image" keel --version | head -1)
echo "run as a program: $version"
timeout 60 podman run --rm "$image" test -s /etc/ssl/certs/ca-certificates.crt \
  || { echo "FAIL: the image has no CA certificates (s3:// over TLS)"; exit 1; }
status=0
refusal=$(timeout 60 podman run --rm "$image" predict 2>&1) || status=$?
if [ "$status" != 127 ] || ! grep -q "'predict' is neither train, serve" <<<"$refusal"; then
  echo "FAIL: 'predict' was not refused (exit $status): $refusal"
  exit 1
fi
echo "an unknown word is refused (exit 127, naming it)"

# train: SageMaker's contract under /opt/ml, mounted.
if ! help=$(timeout 60 podman run --rm "$image" train --help 2>&1); then
  echo "train: skipped, keel train is not built yet (the image's keel train --help fails:" \
    "$(head -1 <<<"$help"))"
else
  ml=$work/ml
  mkdir -p "$ml/input/config" "$ml/input/data/train" "$ml/model" "$ml/output"
  cp "$work"/data/train/* "$ml/input/data/train/"
  cat >"$ml/input/config/hyperparameters.json" <<'EOF'
{"feature_dim": "20", "predictor_type": "binary_classifier", "epochs": "2", "mini_batch_size": "200"}
EOF
  cat >"$ml/input/config/resourceconfig.json" <<'EOF'
{"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "eth0"}
EOF
  cat >"$ml/input/config/inputdataconfig.json" <<'EOF'
{"train": {"ContentType": "text/libsvm", "TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}}
EOF
  status=0
  timeout 300 podman run --name "$prefix-train" --hostname algo-1 --volume "$ml:/opt/ml" \
    "$image" train >"$work/train.log" 2>&1 || status=$?
  if [ "$status" != 0 ]; then
    echo "FAIL: train exited $status; its output and output/failure:"
    tail -30 "$work/train.log"
    cat "$ml/output/failure" 2>/dev/null || true
    exit 1
  fi
  if [ ! -f "$ml/model/model.manifest" ]; then
    echo "FAIL: train left no model in model/: $(ls "$ml/model")"
    exit 1
  fi
  "$keel" predict --model_dir="$ml/model" --data="$work/records.libsvm" \
    --out="$work/trained.json" --accept=application/json >/dev/null
  echo "train: exit 0, model/ holds a model that keel predict scores" \
    "($(grep -o '"score"' "$work/trained.json" | wc -l) records)"
fi
echo "image test done in $(($(date +%s) - start)) s"
