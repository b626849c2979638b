#!/usr/bin/env bash
# Screenshots for the docs: runs a small job (2 servers backing up each other's
# range, 2 workers, checkpoints, worker 1 stopped for 3 s) and takes, with
# headless Chromium (Debian's chromium-headless-shell, from scripts/setup.sh),
# one of the scheduler's status page while it runs (docs/images/status.png) and
# one of the report `keel launch --report` makes (docs/images/report.png).
#
#   scripts/screenshots.sh            (KEEL=path/to/keel, WIDTH, HEIGHT override)
set -euo pipefail
cd "$(dirname "$0")/.."
keel="${KEEL:-$PWD/build/keel}"
width="${WIDTH:-1280}"
height="${HEIGHT:-2100}"
# The browser itself: /usr/bin/chromium-headless-shell is a wrapper script
# that does not exec it, so its PID would not be the browser's.
browser=/usr/lib/chromium/chromium-headless-shell
[ -x "$browser" ] || { echo "$browser is missing: run scripts/setup.sh" >&2; exit 1; }
[ -x "$keel" ] || { echo "$keel is missing: build Keel first (README.md)" >&2; exit 1; }

work=$(mktemp -d /tmp/keel-screenshots-XXXXXX)
browser_pid=""
launch_pid=""
cleanup() {
  [ -n "$browser_pid" ] && kill -9 "$browser_pid" 2>/dev/null || true
  [ -n "$launch_pid" ] && kill -INT "$launch_pid" 2>/dev/null && wait "$launch_pid" || true
  rm -rf "$work"
}
trap cleanup EXIT

"$keel" datagen --model=linear --rows=300000 --features=20000 --nnz=10 --seed=7 --train_files=2 \
  --out="$work/data" >/dev/null
# The job runs in the background: its status page is taken while it runs.
"$keel" launch --servers=2 --workers=2 --replication=1 --job=linear_learner --epochs=6 \
  --mini_batch_size=100 --train="$work/data/train" --validation="$work/data/validation" \
  --model_dir="$work/model" --checkpoint_uri="$work/checkpoints" --faults=stop:worker:1@6s+3s \
  --minloglevel=1 --report > "$work/launch.log" 2>&1 &
launch_pid=$!

# Runs the browser on $1 into the screenshot $2 (more flags after), bounded:
# it is killed by its PID after 90 s.
screenshot() {
  local url=$1 png=$2
  shift 2
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$work/profile" --screenshot="$PWD/$png" "$@" "$url" > "$work/browser.log" 2>&1 &
  browser_pid=$!
  for _ in $(seq 900); do kill -0 "$browser_pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$browser_pid" 2>/dev/null; then
    echo "the browser did not finish in 90 s" >&2; exit 1
  fi
  wait "$browser_pid" || { cat "$work/browser.log" >&2; exit 1; }
  browser_pid=""
  echo "$png: $(python3 tests/png_summary.py "$png"), $(stat -c %s "$png") bytes"
}

# The status page once two epochs are decided (bounded: 120 s).
port=""
for _ in $(seq 1200); do
  port=$(sed -n 's|^status page: http://127.0.0.1:\([0-9]*\)/$|\1|p' "$work/launch.log")
  if [ -n "$port" ] && python3 - "$port" <<'PY'
import json, sys, urllib.request
answer = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/status.json", timeout=5)
sys.exit(0 if len(json.load(answer)["progress"]["decided"]) >= 2 else 1)
PY
  then break; fi
  kill -0 "$launch_pid" 2>/dev/null || break
  sleep 0.1
done
mkdir -p docs/images
[ -n "$port" ] || { cat "$work/launch.log" >&2; echo "no status page in 120 s" >&2; exit 1; }
screenshot "http://127.0.0.1:$port/" docs/images/status.png --window-size="$width,1500" \
  --virtual-time-budget=5000

wait "$launch_pid" || { cat "$work/launch.log" >&2; exit 1; }
launch_pid=""
grep '^report: ' "$work/launch.log"
screenshot "file://$work/model/report.html" docs/images/report.png --window-size="$width,$height"
