#!/usr/bin/env python3
"""The best a factorization machine told the planted prior could do on a
`keel datagen --model=fm` set: the factorization machine's counterpart of
prior_bound.sh.

`keel datagen` draws feature f's planted linear weight from a normal
distribution of deviation 2 x 1.6 / sqrt(nnz) x s(f) and each of its k planted
factors from one of deviation 2 x sqrt(1.2 / sqrt(pairs x k)) x s(f)^2, where
s(f) = (1 + 100 f / F)^-0.75 and pairs = nnz (nnz - 1) / 2
(src/worker/datagen.cc, PlantModel). This script fits a factorization machine
of the planted k to the whole training channel by minimising the summed
logistic loss plus exactly that prior's negative log density (w_f^2 / 2
sigma_f^2 for every weight and factor; the bias unpenalised), with L-BFGS over
the full batch: the maximum a posteriori estimate under the true prior, the
analogue for a factorization machine of the penalised logistic regression
prior_bound.sh runs for the linear set. The factorization machine's objective
is not convex in its factors, so the fit starts from small random factors and
is what L-BFGS reaches from there. A multiplier on the penalty (--scales) gives
a small grid; every scale's validation and test ROC AUC are printed beside the
planted model's (oracle.json), and the best on validation is the bound (an
optimistic choice: the grid is judged on validation itself).

Usage: /usr/bin/python3 scripts/bench/fm_prior_bound.py DATA [--features F]
  [--nnz 20] [--k 4] [--scales 1] [--iterations 400] [--rows N]
DATA: a datagen folder (train/, validation/, test/ as libsvm, oracle.json);
F defaults to the number ending DATA's name (data-ROWS-FEATURES). Needs
python3-sklearn (scripts/setup.sh --tests). At 10^6 rows and 10^5 features
one scale takes 5-15 minutes on 2 cores.
"""

import argparse
import glob
import json
import math
import os
import re
import sys
import time

import numpy as np
from scipy import optimize, sparse
from sklearn.datasets import load_svmlight_files
from sklearn.metrics import roc_auc_score


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data")
    parser.add_argument("--features", type=int, default=0)
    parser.add_argument("--nnz", type=int, default=20)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--scales", default="1")
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--rows", type=int, default=0, help="train on the first N rows only")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.features <= 0:
        match = re.search(r"data-\d+-(\d+)$", os.path.basename(os.path.normpath(args.data)))
        if not match:
            parser.error("give --features (DATA's name is not data-ROWS-FEATURES)")
        args.features = int(match.group(1))
    return args


def load(data, features):
    channels = ["train", "validation", "test"]
    files = {c: sorted(glob.glob(os.path.join(data, c, "*.libsvm"))) for c in channels}
    for channel, names in files.items():
        if not names:
            sys.exit(f"fm_prior_bound.py: no {channel}/*.libsvm in {data}")
    flat = [name for c in channels for name in files[c]]
    loaded = load_svmlight_files(flat, n_features=features, zero_based=False, dtype=np.float64)
    parts = {}
    at = 0
    for channel in channels:
        xs = loaded[2 * at:2 * (at + len(files[channel])):2]
        ys = loaded[2 * at + 1:2 * (at + len(files[channel])):2]
        parts[channel] = (sparse.vstack(xs).tocsr(), np.concatenate(ys))
        at += len(files[channel])
    return parts


def prior_deviations(features, nnz, k):
    f = np.arange(features, dtype=np.float64)
    influence = (1.0 + 100.0 * f / features) ** -0.75
    linear = 2.0 * 1.6 / math.sqrt(nnz) * influence
    pairs = 0.5 * nnz * (nnz - 1)
    factor = 2.0 * math.sqrt(1.2 / math.sqrt(pairs * k)) * influence ** 2
    return linear, factor


class Fm:
    """Score, loss and gradient of a factorization machine over sparse rows."""

    def __init__(self, x, y, features, k):
        self.x = x
        self.x_t = x.T.tocsr()
        self.x2 = x.multiply(x).tocsr()
        self.x2_t = self.x2.T.tocsr()
        self.y = np.where(y > 0, 1.0, 0.0)
        self.features = features
        self.k = k

    def split(self, theta):
        f, k = self.features, self.k
        return theta[0], theta[1:1 + f], theta[1 + f:].reshape(f, k)

    def scores(self, x, x2, theta):
        bias, w, v = self.split(theta)
        xv = x @ v
        return bias + x @ w + 0.5 * ((xv ** 2).sum(axis=1) - x2 @ (v ** 2).sum(axis=1)), xv

    def loss_and_gradient(self, theta, precision_w, precision_v):
        bias, w, v = self.split(theta)
        s, xv = self.scores(self.x, self.x2, theta)
        # log(1 + e^s) - y s, and its derivative sigmoid(s) - y, without overflow.
        loss = np.sum(np.logaddexp(0.0, s) - self.y * s)
        r = 0.5 * (1.0 + np.tanh(0.5 * s)) - self.y
        grad_v = self.x_t @ (r[:, None] * xv) - v * (self.x2_t @ r)[:, None]
        loss += 0.5 * np.sum(precision_w * w ** 2) + 0.5 * np.sum(precision_v[:, None] * v ** 2)
        gradient = np.concatenate(([r.sum()], self.x_t @ r + precision_w * w,
                                   (grad_v + precision_v[:, None] * v).ravel()))
        return loss, gradient


def main():
    args = parse_args()
    with open(os.path.join(args.data, "oracle.json")) as f:
        oracle = json.load(f)
    start = time.time()
    parts = load(args.data, args.features)
    x, y = parts["train"]
    if args.rows:
        x, y = x[:args.rows], y[:args.rows]
    print(f"== {args.data}: {x.shape[0]} training rows, {args.features} features, k {args.k}; "
          f"read in {time.time() - start:.0f} s", flush=True)
    model = Fm(x, y, args.features, args.k)
    sigma_w, sigma_v = prior_deviations(args.features, args.nnz, args.k)
    rng = np.random.default_rng(args.seed)
    print("scale | validation AUC | oracle | gap | test AUC | oracle | gap | iterations | seconds")
    best = None
    for scale in [float(s) for s in args.scales.split(",")]:
        begun = time.time()
        precision_w = scale / sigma_w ** 2
        precision_v = scale / sigma_v ** 2
        theta = np.concatenate(([0.0], np.zeros(args.features),
                                (0.01 * sigma_v[:, None] * rng.standard_normal(
                                    (args.features, args.k))).ravel()))
        fit = optimize.minimize(model.loss_and_gradient, theta, args=(precision_w, precision_v),
                                jac=True, method="L-BFGS-B",
                                options={"maxiter": args.iterations, "maxcor": 20})
        row = [f"{scale:g}"]
        aucs = {}
        for channel in ["validation", "test"]:
            xc, yc = parts[channel]
            s, _ = model.scores(xc, xc.multiply(xc).tocsr(), fit.x)
            aucs[channel] = roc_auc_score(yc > 0, s)
            planted = oracle[f"{channel}:roc_auc_score"]
            row += [f"{aucs[channel]:.4f}", f"{planted:.4f}", f"{planted - aucs[channel]:.4f}"]
        row += [str(fit.nit), f"{time.time() - begun:.0f}"]
        print(" | ".join(row), flush=True)
        print(f"  (objective {fit.fun:.6g}, gradient norm {np.linalg.norm(fit.jac):.3g}: "
              f"{fit.message})", flush=True)
        if best is None or aucs["validation"] > best[1]:
            best = (scale, aucs["validation"])
    gap = oracle["validation:roc_auc_score"] - best[1]
    print(f"bound: validation ROC AUC {best[1]:.4f} at scale {best[0]:g}, "
          f"gap to the planted model {gap:.4f}")


if __name__ == "__main__":
    main()
