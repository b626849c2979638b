#!/usr/bin/env bash
# A checkpoint of a large table written to S3: `keel bench checkpoint` with
# --checkpoint_uri=s3://... against the S3-protocol test server
# (scripts/s3rver, @20minutes/s3rver, Node) on loopback, two builds side by
# side (BEFORE, AFTER: alternating runs, ROUNDS each). The benchmark's process
# plays the server: it fills a table of KEYS rows (adagrad: 16 bytes a row in
# the file), copies it, writes it as a checkpoint through the server's
# SnapshotWriter and reads it back a piece at a time; a delta and a full
# checkpoint follow (--rounds=1). Each run: the first full checkpoint's write
# seconds (sort, encode, upload) and what the write held (the process's peak
# RSS during it over its RSS when it began: VmHWM reset through
# /proc/self/clear_refs), and the run's peak RSS (/usr/bin/time's maximum
# resident set size: the table's fill may set it). Prints each run, then the
# medians and AFTER/BEFORE.
# Figures: docs/BENCHMARKS.md ("Large tables").
#
#   scripts/bench/s3_checkpoint.sh BEFORE_KEEL AFTER_KEEL [KEYS] [ROUNDS]
#   (KEYS 10000000, ROUNDS 3; needs node and `npm ci` in scripts/s3rver)
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
before=$1
after=$2
keys="${3:-10000000}"
rounds="${4:-3}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-s3}"
[ -f scripts/s3rver/node_modules/@20minutes/s3rver/package.json ] || {
  echo "scripts/s3rver is not installed: npm ci in scripts/s3rver" >&2
  exit 2
}
rm -rf "$work"
mkdir -p "$work/s3"
track_processes

export AWS_ACCESS_KEY_ID=KEELBENCHACCESSKEY AWS_SECRET_ACCESS_KEY=keel-bench-secret
export AWS_REGION=us-east-1
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
node --openssl-legacy-provider scripts/s3rver/start.js --port "$port" --directory "$work/s3" \
  --bucket keel-bench >"$work/s3rver.log" 2>&1 &
tracked $!
wait_for 30 "$work/s3rver.log" "s3rver listening"
export AWS_ENDPOINT_URL="http://127.0.0.1:$port"

# run LABEL KEEL N: one benchmark; prints "LABEL peak_kb write_s write_held_mb".
run() {
  local label=$1 binary=$2 n=$3 out="$work/$1-$3"
  /usr/bin/time -f "%M" -o "$out.time" "$binary" bench checkpoint --checkpoint_keys="$keys" \
    --rounds=1 --checkpoint_uri="s3://keel-bench/$label-$n" >"$out.log" 2>"$out.err"
  local write
  write=$(sed -n 's/^first full checkpoint:.* write \([0-9.]*\) s, write peak +\([0-9.-]*\) MB$/\1 \2/p' \
    "$out.log")
  echo "$label $(tail -1 "$out.time") $write"
}

results="$work/results"
: >"$results"
echo "keys $keys, $rounds rounds; label peak_rss_kb write_s write_held_mb"
for ((i = 1; i <= rounds; i++)); do
  run before "$before" "$i" | tee -a "$results"
  run after "$after" "$i" | tee -a "$results"
done
for label in before after; do
  peak=$(awk -v l="$label" '$1 == l { print $2 }' "$results" | median)
  write=$(awk -v l="$label" '$1 == l { print $3 }' "$results" | median)
  held=$(awk -v l="$label" '$1 == l { print $4 }' "$results" | median)
  echo "$label median: peak RSS $((peak / 1024)) MiB, write $write s, held while writing $held MB"
  eval "${label}_peak=$peak ${label}_write=$write ${label}_held=$held"
done
# shellcheck disable=SC2154 # set by the eval above
awk -v bp="$before_peak" -v ap="$after_peak" -v bw="$before_write" -v aw="$after_write" \
  -v bh="$before_held" -v ah="$after_held" 'BEGIN {
    printf "after/before: peak RSS %.2f, write time %.2f, held while writing %.3f\n",
      ap / bp, aw / bw, ah / bh }'
