#!/usr/bin/env bash
# The first ten minutes of a new user, measured: a fresh Debian 12 root made
# with mmdebstrap (Essential packages and apt only: no compiler, fewer packages
# than a new machine of this kind has), a clone of this repository's HEAD in
# it, /usr/local/cuda bind-mounted as these machines have it, and an empty
# ccache. In it, as root: scripts/demo.sh, timed; then, unless
# KEEL_FIRST_RUN_TESTS=0, scripts/test.sh's set-up and build (the step that
# must rebuild nothing the demo built), timed, with a count of what the demo
# built that it built again; then the command that was asked
# for in KEEL_FIRST_RUN_THEN, if any (for example "scripts/test.sh -L unit").
# Prints each step's line with its time. Needs root. The root is removed at the end.
#   scripts/bench/first_run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" -eq 0 ] || { echo "first_run.sh: needs root (mmdebstrap, chroot, mounts)"; exit 1; }
root=$(mktemp -d /tmp/keel-first-run.XXXXXX)
rmdir "$root"
mounts=()
cleanup() {
  for ((i = ${#mounts[@]} - 1; i >= 0; --i)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
  rm -rf "$root"
}
trap cleanup EXIT
start=$(date +%s)
mmdebstrap --quiet --variant=apt --include=git,ca-certificates bookworm "$root"
echo "first_run: a fresh Debian 12 root in $root: $(($(date +%s) - start)) s"
git clone -q "$PWD" "$root/root/keel"
# KEEL_FIRST_RUN_COMMIT: measure another commit (an earlier one, side by side).
[ -z "${KEEL_FIRST_RUN_COMMIT:-}" ] || git -C "$root/root/keel" checkout -q "$KEEL_FIRST_RUN_COMMIT"
for dir in proc sys dev dev/pts; do
  mount --bind "/$dir" "$root/$dir"
  mounts+=("$root/$dir")
done
if [ -d /usr/local/cuda ]; then
  mkdir -p "$root/usr/local/cuda"
  mount --bind -o ro "$(readlink -f /usr/local/cuda)" "$root/usr/local/cuda"
  mounts+=("$root/usr/local/cuda")
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The machine's own certificate authorities (a registry reached through this
# workplace's proxy is signed by one of them), as a new machine of this kind has.
ca_bundle=${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
mkdir -p "$root/etc/keel-first-run"
cp "$ca_bundle" "$root/etc/keel-first-run/ca.crt"
in_root() {
  chroot "$root" env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    TERM=dumb NODE_EXTRA_CA_CERTS=/etc/keel-first-run/ca.crt bash -c "cd /root/keel && $1"
}
time_it() {
  local what=$1 command=$2 began
  began=$(date +%s)
  in_root "$command"
  echo "first_run: $what: $(($(date +%s) - began)) s"
}
time_it "scripts/demo.sh (fresh root)" "scripts/demo.sh"
if [ "${KEEL_FIRST_RUN_TESTS:-1}" != 0 ]; then
  in_root "touch build/.demo-built"
  # KEEL_FIRST_RUN_SETUP: the tests' set-up of another commit (before this
  # one's, scripts/test.sh ran plain scripts/setup.sh).
  tests_setup=${KEEL_FIRST_RUN_SETUP:-KEEL_SETUP_QUIET=1 scripts/setup.sh --tests}
  time_it "the tests' set-up after the demo ($tests_setup)" "$tests_setup"
  in_root 'echo "first_run: what the demo built, built again by the tests set-up:" \
    $(find build/keel build/CMakeFiles -newer build/.demo-built \( -name "*.o" -o -name "*.a" \
      -o -name "*.gch" -o -name keel \) | wc -l) "file(s)"'
fi
if [ -n "${KEEL_FIRST_RUN_THEN:-}" ]; then
  time_it "$KEEL_FIRST_RUN_THEN" "$KEEL_FIRST_RUN_THEN"
fi
