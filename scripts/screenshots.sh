#!/usr/bin/env bash
# Screenshots for the docs: runs a small job (2 servers, 2 workers, checkpoints,
# worker 1 stopped for 3 s), makes its report with `keel launch
# --report`, and takes a screenshot of it with headless Chromium (Debian's
# chromium-headless-shell, from scripts/setup.sh) into docs/images/report.png.
#
#   scripts/screenshots.sh            (KEEL=path/to/keel, WIDTH, HEIGHT override)
set -euo pipefail
cd "$(dirname "$0")/.."
keel="${KEEL:-$PWD/build/keel}"
width="${WIDTH:-1280}"
height="${HEIGHT:-2100}"
out=docs/images/report.png
# The browser itself: /usr/bin/chromium-headless-shell is a wrapper script
# that does not exec it, so its PID would not be the browser's.
browser=/usr/lib/chromium/chromium-headless-shell
[ -x "$browser" ] || { echo "$browser is missing: run scripts/setup.sh" >&2; exit 1; }
[ -x "$keel" ] || { echo "$keel is missing: build Keel first (README.md)" >&2; exit 1; }

work=$(mktemp -d /tmp/keel-screenshots-XXXXXX)
browser_pid=""
cleanup() {
  [ -n "$browser_pid" ] && kill -9 "$browser_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$keel" datagen --model=linear --rows=300000 --features=20000 --nnz=10 --seed=7 --train_files=2 \
  --out="$work/data" >/dev/null
"$keel" launch --servers=2 --workers=2 --job=linear_learner --epochs=6 --mini_batch_size=100 \
  --train="$work/data/train" --validation="$work/data/validation" --model_dir="$work/model" \
  --checkpoint_uri="$work/checkpoints" --faults=stop:worker:1@6s+3s --minloglevel=1 --report \
  > "$work/launch.log" 2>&1 || { cat "$work/launch.log" >&2; exit 1; }
grep '^report: ' "$work/launch.log"

mkdir -p "$(dirname "$out")"
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile" \
  --window-size="$width,$height" --screenshot="$PWD/$out" "file://$work/model/report.html" \
  > "$work/browser.log" 2>&1 &
browser_pid=$!
# Bounded: the browser is killed by its PID after 90 s.
for _ in $(seq 900); do kill -0 "$browser_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$browser_pid" 2>/dev/null; then
  echo "the browser did not finish in 90 s" >&2; exit 1
fi
wait "$browser_pid" || { cat "$work/browser.log" >&2; exit 1; }
browser_pid=""
summary=$(python3 tests/png_summary.py "$out")
echo "$out: $summary, $(stat -c %s "$out") bytes"
