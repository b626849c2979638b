#!/usr/bin/env bash
# Builds Keel's container image, deploy/container/Containerfile, with podman,
# from Debian's packages alone: no image is pulled from a registry.
#
#   scripts/container/build_image.sh
#
# 1. The Debian package: scripts/package.sh (build-package/keel_VERSION_amd64.deb;
#    it rebuilds only what changed).
# 2. The base, a Debian 12 minbase root made by mmdebstrap from the apt sources
#    this machine uses (its bookworm entries in /etc/apt/sources.list(.d)) and
#    imported into podman's store as localhost/keel-base:bookworm-minbase: once
#    per machine, reused while it is in the store (KEEL_IMAGE_NEW_BASE=1 makes it
#    again). About a minute, most of it mmdebstrap.
# 3. The image, tagged localhost/keel:VERSION and localhost/keel:latest: the
#    libraries the package declares, installed with apt from the base's
#    sources, then the package and the entry point.
# Prints the image's name and size.
#
# Podman runs with deploy/container/containers.conf (CONTAINERS_CONF, unless
# already set): runc and no default ulimits, which these machines need. Needs
# root (podman's store and mmdebstrap's root mode). scripts/setup.sh
# --container installs podman, runc and mmdebstrap; this script runs it.
#
# KEEL_IMAGE_BASE=IMAGE builds on another Debian 12 image already in the store
# instead of making the base. KEEL_ENABLE_CUDA=ON builds the CUDA variant
# (the CUDA package, tagged localhost/keel-cuda:...) and needs KEEL_IMAGE_BASE to
# carry the CUDA toolkit (the Containerfile says what).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/steps.sh
export KEEL_SETUP_QUIET=${KEEL_SETUP_QUIET:-1}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/deploy/container/containers.conf}
if [ "$(id -u)" -ne 0 ]; then
  echo "$keel_step_script: needs root (podman's store, mmdebstrap's root mode)" >&2
  exit 1
fi
cuda=${KEEL_ENABLE_CUDA:-OFF}
name=localhost/keel
tree=build-package
if [ "$cuda" != OFF ]; then
  name=localhost/keel-cuda
  tree=build-package-cuda
  if [ -z "${KEEL_IMAGE_BASE:-}" ]; then
    echo "$keel_step_script: KEEL_ENABLE_CUDA=$cuda needs KEEL_IMAGE_BASE, a Debian 12 image" \
      "with the CUDA toolkit at /usr/local/cuda (deploy/container/Containerfile)" >&2
    exit 1
  fi
fi

scripts/setup.sh --container --install-only
KEEL_ENABLE_CUDA=$cuda quiet scripts/package.sh
deb=$(ls "$tree"/keel_*_amd64.deb)
version=$(dpkg-deb --field "$deb" Version)

base=${KEEL_IMAGE_BASE:-localhost/keel-base:bookworm-minbase}
if [ -z "${KEEL_IMAGE_BASE:-}" ] \
   && { [ "${KEEL_IMAGE_NEW_BASE:-0}" = 1 ] || ! podman image exists "$base"; }; then
  # The sources: every file of the host's that lists a bookworm suite
  # (bookworm, bookworm-updates, bookworm-security), as they are.
  sources=()
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
              /etc/apt/sources.list.d/*.sources; do
    [ -f "$file" ] || continue
    grep -v '^[[:space:]]*#' "$file" \
      | grep -Eq '(^|[[:space:]])bookworm(-[a-z]+)?([[:space:]]|$)' && sources+=("$file")
  done
  if [ ${#sources[@]} -eq 0 ]; then
    echo "$keel_step_script: no apt source for bookworm in /etc/apt/sources.list(.d)" >&2
    exit 1
  fi
  step "making the base $base (mmdebstrap minbase from ${sources[*]})"
  work=$(mktemp -d /tmp/keel-image-base.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  # Like debian:bookworm-slim: no man pages, docs (but copyrights) or
  # translations, in the base and in whatever is installed on it.
  quiet mmdebstrap --variant=minbase --format=tar \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$work/root.tar" "${sources[@]}"
  quiet podman import --message "Debian 12 minbase (mmdebstrap) for Keel's image" \
    "$work/root.tar" "$base"
  rm -rf "$work"
  step_done
fi

# podman tags reject '+'; VERSION's '+COUNT.gHASH' becomes '_COUNT.gHASH'.
tag=${version//+/_}
step "building $name:$tag on $base"
context=$(mktemp -d /tmp/keel-image-context.XXXXXX)
trap 'rm -rf "$context"' EXIT
cp "$deb" "$context/keel.deb"
# The package's dependencies by name, one a line (the first of alternatives):
# the Containerfile installs them in a layer of their own.
dpkg-deb --field "$deb" Depends | tr ',' '\n' \
  | sed -e 's/|.*//' -e 's/(.*)//' -e 's/[[:space:]]//g' | grep -v '^$' >"$context/keel.depends"
cp deploy/container/entrypoint.sh "$context/entrypoint.sh"
chmod 755 "$context/entrypoint.sh"
previous=$(podman image inspect --format '{{.Id}}' "$name:latest" 2>/dev/null || true)
quiet podman build --pull=never --file deploy/container/Containerfile \
  --build-arg BASE="$base" --build-arg KEEL_VERSION="$version" \
  --tag "$name:$tag" --tag "$name:latest" "$context"
rm -rf "$context"
# The image this one replaces when nothing names it any more (a rebuild of the
# same version); one still tagged with its own version, or used by a container,
# stays.
if [ -n "$previous" ] \
   && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$name:latest")" ]; then
  podman rmi "$previous" >/dev/null 2>&1 || true
fi
step_done
echo "$name:$tag ($name:latest), $(podman image inspect --format '{{.Size}}' "$name:$tag" \
  | awk '{ printf "%.0f MB", $1 / 1e6 }'), keel $version"
