#!/usr/bin/env bash
# Apply time alone, two builds side by side: scripts/bench/apply_time.cc
# (ParameterTable::Push of rows that exist, each optimizer and row width, and
# the same pushes through PushSlots as "OPTIMIZER/slots": a kept key list's)
# compiled against each build tree's libraries and the headers of its source,
# then run in alternating rounds (A B, then B A); prints every round's
# ns per key and each case's median with its ratio (B / A).
#
#   scripts/bench/apply_time.sh SRC_A BUILD_A SRC_B BUILD_B [ROUNDS] [KEYS] [WIDTHS]
#
# SRC_*: a source tree (its src/ headers); BUILD_*: its build tree, in which
# `cmake --build BUILD --target keel_kv` has run. ROUNDS: 3; KEYS: rows of each
# table, 1000000; WIDTHS: "1 2 5 9 33".
set -euo pipefail
usage="usage: apply_time.sh SRC_A BUILD_A SRC_B BUILD_B [ROUNDS] [KEYS] [WIDTHS]"
src_a=$(realpath "${1:?$usage}"); build_a=$(realpath "${2:?$usage}")
src_b=$(realpath "${3:?$usage}"); build_b=$(realpath "${4:?$usage}")
rounds="${5:-3}"
keys="${6:-1000000}"
read -r -a widths <<< "${7:-1 2 5 9 33}"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "apply_time.sh: ROUNDS must be a positive integer" >&2; exit 1; }
harness="$(dirname "$0")/apply_time.cc"
out="$(mktemp -d /tmp/keel-apply-time-XXXXXX)"
for side in a b; do
  src_var="src_$side"; build_var="build_$side"
  # The build's own optimization flags (CMakeLists.txt: Release).
  c++ -O3 -std=gnu++17 -I"${!src_var}/src" -isystem "${!build_var}" "$harness" \
    "${!build_var}/libkeel_kv.a" "${!build_var}/libkeel_base.a" "${!build_var}/libkeel_proto.a" \
    -lglog -lgflags -lprotobuf -lzmq -lcrypto -pthread -o "$out/apply_time_$side"
done
for round in $(seq 1 "$rounds"); do
  order="a b"
  [ $((round % 2)) -eq 0 ] && order="b a"
  for side in $order; do
    "$out/apply_time_$side" "$keys" 3 "${widths[@]}" |
      while read -r name width ns; do echo "$round $side $name $width $ns"; done >> "$out/rounds.txt"
  done
done
echo "round side optimizer width ns_per_key"
cat "$out/rounds.txt"
python3 - "$out/rounds.txt" <<'PY'
import collections, statistics, sys
values = collections.defaultdict(list)
for line in open(sys.argv[1]):
    round_, side, name, width, ns = line.split()
    values[(name, int(width), side)].append(float(ns))
print("optimizer width  A ns/key  B ns/key  B/A")
for name, width in sorted({(n, w) for n, w, _ in values}):
    a = statistics.median(values[(name, width, "a")])
    b = statistics.median(values[(name, width, "b")])
    print("%-9s %5d %9.2f %9.2f %5.2f" % (name, width, a, b, b / a))
PY
