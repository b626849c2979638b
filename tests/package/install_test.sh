#!/usr/bin/env bash
# The Debian package, installed as a user installs it: scripts/package.sh
# builds it, then mmdebstrap makes a throwaway Debian 12 root (the "apt"
# variant: Essential and apt only) and apt installs the .deb there, pulling in
# what it declares it depends on and nothing else. Inside that root: `keel
# --version` names the version and commit, the man page, the completion and
# the examples are where the package says, and a tiny job trains from an
# example flagfile, writes its model and scores a file with keel predict.
# Needs root (mmdebstrap's root mode): exits 77 (skipped) without it, saying so.
# The root is removed at the end, pass or fail.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: installing into a throwaway root needs root (mmdebstrap's root mode)"
  exit 77
fi
for tool in mmdebstrap dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: scripts/setup.sh --tests installs it"; exit 1; }
done

scripts/package.sh
deb=$(readlink -f build-package/keel_*.deb)
version=$(dpkg-deb --field "$deb" Version)
root=$(mktemp -d /tmp/keel-package-root.XXXXXX)
trap 'rm -rf "$root"' EXIT
rmdir "$root"

# tests/package/check_installed.sh runs in the root after the package is
# installed (mmdebstrap mounts /proc, /sys and /dev there for its hooks).
mmdebstrap --quiet --variant=apt --mode=root \
  --hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
  --include="$deb" \
  --customize-hook="copy-in tests/package/check_installed.sh /tmp" \
  --customize-hook="chroot \"\$1\" sh /tmp/check_installed.sh '$version'" \
  bookworm "$root"
echo "installed $deb ($version) into a Debian 12 root and trained a job from it"
