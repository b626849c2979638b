#!/bin/sh
# The image's entry point, as SageMaker starts it: `IMAGE train` on every
# training instance, `IMAGE serve` on every hosting instance.
#
#   train [FLAGS...]  keel train: SageMaker's training contract under /opt/ml
#                     (the hyperparameters, the hosts and the channels it reads,
#                     the model, failure and checkpoints it writes).
#   serve [FLAGS...]  keel serve on the model in /opt/ml/model, on every address
#                     of the container, port SAGEMAKER_BIND_TO_PORT (SageMaker
#                     sets it for a container in an inference pipeline), 8080
#                     without it. FLAGS come after these, so they override them.
#   PROGRAM [ARG...]  any other program in the image, run as given (for
#                     example `keel predict ...`, `keel --version`, `sh`).
#
# With no argument it prints this usage and exits 2; a first argument that is
# neither train, serve nor a program in the image is refused with exit 127,
# naming it. Each command replaces this script (exec), so keel is the
# container's first process and receives SIGTERM itself (keel train
# checkpoints on it, keel serve finishes the requests in flight).
set -eu

usage() {
  cat >&2 <<'EOF'
usage: IMAGE train [FLAGS...]   keel train on SageMaker's contract under /opt/ml
       IMAGE serve [FLAGS...]   keel serve on /opt/ml/model, port ${SAGEMAKER_BIND_TO_PORT:-8080}
       IMAGE PROGRAM [ARG...]   a program in the image (keel predict ..., keel --version, sh)
EOF
}

if [ $# -eq 0 ]; then
  usage
  exit 2
fi

case $1 in
  train)
    shift
    exec keel train "$@"
    ;;
  serve)
    shift
    exec keel serve --model_dir=/opt/ml/model --serve_bind=0.0.0.0 \
      --serve_port="${SAGEMAKER_BIND_TO_PORT:-8080}" "$@"
    ;;
  *)
    if ! command -v "$1" >/dev/null 2>&1; then
      echo "keel image: '$1' is neither train, serve nor a program in the image" \
        "(for a keel command: keel $1)" >&2
      usage
      exit 127
    fi
    exec "$@"
    ;;
esac
