#!/usr/bin/env bash
# Keel's default linear learner and factorization machine on public real data
# sets, beside scikit-learn (StandardScaler + LogisticRegression(max_iter=5000)
# or Ridge) on the same 75/25 splits. The sets are those Debian ships, raw as
# published (python3-sklearn's bundled sets, python3-statsmodels' sets; nothing
# is downloaded); each is written in CSV, libsvm and sparse recordIO-protobuf,
# and Keel trains on each with no hyperparameter but --job, --predictor_type,
# --num_classes (multiclass), --feature_dim and the data, on 1 server and 2
# workers. What the sets are, the split rule and the checks that Keel read the
# files right: scripts/bench/real_data.py.
#
# Prints the table (Markdown) on standard output, the progress and the whole
# run's time on standard error; the data, models and logs go to a temporary
# folder removed at the end.
#
#   scripts/bench/real_data.sh [--out TABLE.md] [--jsonl FIGURES.jsonl]
#   SETS=iris,boston scripts/bench/real_data.sh      # some sets alone
#   KEEL (default build/keel), RUNS (Keel's runs of each split, 5: the table gives
#   their median, then their spread), KEEL_RUN_TIMEOUT (seconds a keel run may take, 300)
#
# --jsonl appends every figure (each split, learner and format, with its
# training seconds) and each split's format check as JSON lines, for comparing
# runs. Needs python3-sklearn and python3-statsmodels (scripts/setup.sh --tests).
# Exit status 1 if a Keel run or a format check failed.
set -euo pipefail
caller=$PWD # where --out and --jsonl are relative to (bench.sh moves to the repository root)
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
keel=$(realpath -m "$(keel_binary KEEL)")
[ -x "$keel" ] || { echo "real_data.sh: $keel is not an executable; build first" >&2; exit 1; }
# Debian's python3, which python3-sklearn and python3-statsmodels install into
# (another python3 may come first on the PATH).
python=/usr/bin/python3
"$python" -c 'import sklearn, statsmodels' 2>/dev/null || {
  echo "real_data.sh: $python lacks sklearn or statsmodels; run scripts/setup.sh --tests" >&2
  exit 1
}

path() { (cd "$caller" && realpath -m "$1"); }
options=()
while [ $# -gt 0 ]; do
  case $1 in
    --out | --jsonl) options+=("$1=$(path "$2")"); shift 2 ;;
    --out=* | --jsonl=*) options+=("${1%%=*}=$(path "${1#*=}")"); shift ;;
    *) echo "usage: real_data.sh [--out TABLE.md] [--jsonl FIGURES.jsonl]" >&2; exit 2 ;;
  esac
done
[ -z "${SETS:-}" ] || options+=("--sets=$SETS")

work=$(mktemp -d "${TMPDIR:-/tmp}/keel-real-data.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(now)
status=0
"$python" scripts/bench/real_data.py --keel="$keel" --work="$work" \
  --runs="${RUNS:-5}" --timeout="${KEEL_RUN_TIMEOUT:-300}" "${options[@]}" || status=$?
echo "real_data.sh: $(echo "$(now) - $start" | bc | xargs printf '%.0f') s in all ($keel)" >&2
exit "$status"
