#!/usr/bin/env bash
# The best a learner told the planted prior could do on the defaults
# benchmark's linear and regression sets (issue 14: "if a target is shown out
# of reach by an estimate ... the estimate's bound plus 0.001 replaces it").
#
# `keel datagen` draws feature f's planted weight from a normal distribution
# of deviation proportional to (1 + 100 f / F)^-0.75 (src/worker/datagen.cc,
# PlantModel). Multiplying each feature's value by that scale makes LIBLINEAR's
# uniform L2 penalty exactly that prior (up to one constant, LIBLINEAR's C, a
# grid here), so its solution is the maximum a posteriori estimate under the
# true prior: for the regression set (Gaussian noise) the posterior mean, the
# best any estimator can do in expected squared error; for the binary set its
# logistic analogue; for the multiclass set, softmax (multinomial logistic)
# regression on the same scaled features (scikit-learn's lbfgs, run to
# convergence), the analogue for the softmax the labels are drawn from. The
# prior's deviation is 2 x 1.6 / sqrt(nnz) = 0.716 on the scaled weights, so
# the exact MAP estimate is C = 0.716^2 = 0.51 for the two logistic learners
# (C multiplies the summed loss, the penalty is |w|^2 / 2); the grid brackets
# it. Validation figures, best over the grid (an optimistic choice: the grid is
# judged on validation itself).
#
# Usage: scripts/bench/prior_bound.sh [DATA [FEATURES]]   (DATA: defaults.sh's
# data folder, default /tmp/keel-bench-defaults/data-1000000-100000; FEATURES:
# the sets' --features, which the prior's scale divides by; default the number
# ending DATA's name, data-ROWS-FEATURES as defaults.sh names it). Needs
# liblinear-tools and python3-sklearn (scripts/setup.sh). About 4 minutes on 2
# cores for the first two sets, 10-20 more for the multiclass set.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data="${1:-/tmp/keel-bench-defaults/data-1000000-100000}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for set in linear regression multiclass; do
  [ -f "$data/$set/oracle.json" ] || { echo "prior_bound.sh: no $data/$set (run defaults.sh first)" >&2; exit 1; }
done
features="${2:-$(basename "$data" | sed -n 's/^data-[0-9]*-\([0-9]*\)$/\1/p')}"
[[ "$features" =~ ^[1-9][0-9]*$ ]] || {
  echo "prior_bound.sh: give the sets' feature count (DATA's name is not data-ROWS-FEATURES)" >&2
  exit 1
}
# The largest feature index the rows hold: above FEATURES, FEATURES is wrong.
largest=$(awk '{ for (i = 2; i <= NF; i++) { split($i, p, ":"); if (p[1] > m) m = p[1] } } END { print m + 0 }' \
  "$data/linear/validation/part-0.libsvm")
(( largest <= features )) || {
  echo "prior_bound.sh: feature $largest in $data/linear, above FEATURES $features" >&2
  exit 1
}
echo "== $data: the prior's scale over $features features"

# scale FILES...: libsvm rows with each value times the planted prior's scale.
scale() {
  awk -v F="$features" '{
    printf "%s", $1
    for (i = 2; i <= NF; i++) {
      split($i, p, ":")
      printf " %s:%.6g", p[1], p[2] * (1 + 100 * (p[1] - 1) / F) ^ -0.75
    }
    printf "\n"
  }' "$@"
}
oracle() { grep -o "\"validation:$2\": *[0-9.e+-]*" "$data/$1/oracle.json" | sed 's/.*: *//'; }

echo "== binary (linear set): L2 logistic regression (-s 0) on prior-scaled features"
scale "$data"/linear/train/part-*.libsvm > "$work/train.svm"
scale "$data/linear/validation/part-0.libsvm" > "$work/validation.svm"
cut -d' ' -f1 "$work/validation.svm" > "$work/labels"
for c in 0.25 0.5 1 2; do
  liblinear-train -q -s 0 -B 1 -c "$c" "$work/train.svm" "$work/model" >/dev/null
  liblinear-predict -b 1 "$work/validation.svm" "$work/model" "$work/out" >/dev/null
  column=$(head -1 "$work/out" | awk '{ for (i = 2; i <= NF; i++) if ($i == 1) print i }')
  auc=$(tail -n +2 "$work/out" | awk -v c="$column" '{ print $c }' | paste -d' ' "$work/labels" - |
        sort -k2,2g | awk -f "$here/auc.awk")
  echo "  C $c: validation AUC $auc (oracle $(oracle linear roc_auc_score))"
done

echo "== regression: ridge regression (-s 11 -p 0) on prior-scaled features"
scale "$data"/regression/train/part-*.libsvm > "$work/train.svm"
scale "$data/regression/validation/part-0.libsvm" > "$work/validation.svm"
cut -d' ' -f1 "$work/validation.svm" > "$work/labels"
for c in 0.05 0.1 0.15 0.3; do
  liblinear-train -q -s 11 -p 0 -e 0.0001 -B 100 -c "$c" "$work/train.svm" "$work/model" >/dev/null
  liblinear-predict "$work/validation.svm" "$work/model" "$work/out" >/dev/null
  paste -d' ' "$work/labels" "$work/out" | awk -v c="$c" -v o="$(oracle regression mse)" \
    '{ d = $1 - $2; s += d * d } END { printf "  C %s: validation MSE %.2f (oracle %.2f, +%.2f%%)\n", c, s / NR, o, 100 * (s / NR / o - 1) }'
done

echo "== multiclass: softmax regression (scikit-learn, lbfgs) on prior-scaled features"
scale "$data"/multiclass/train/part-*.libsvm > "$work/train.svm"
scale "$data/multiclass/validation/part-0.libsvm" > "$work/validation.svm"
# Debian's python3, which python3-sklearn installs into (another python3 may come first on PATH).
/usr/bin/python3 - "$work/train.svm" "$work/validation.svm" "$features" "$(oracle multiclass multiclass_accuracy)" <<'PY'
import sys, warnings
from sklearn.datasets import load_svmlight_file
from sklearn.linear_model import LogisticRegression
train, validation, features, oracle = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
x, y = load_svmlight_file(train, n_features=features + 1)
xv, yv = load_svmlight_file(validation, n_features=features + 1)
for c in (0.25, 0.5, 1.0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = LogisticRegression(C=c, solver="lbfgs", max_iter=300, tol=1e-6).fit(x, y)
    accuracy = (model.predict(xv) == yv).mean()
    print("  C %s: validation accuracy %.4f (oracle %.4f, gap %.4f; %d lbfgs iterations)"
          % (c, accuracy, oracle, oracle - accuracy, model.n_iter_[0]), flush=True)
PY
