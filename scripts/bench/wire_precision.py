#!/usr/bin/env python3
"""Wire precision and quality: the linear learner and the factorization machine
trained with --wire_precision=fp32, bf16 and fp16 side by side (in each round
every precision in turn; or the values of another worker flag given by --flag,
the first of them the one compared with, as --flag=push_filter_threshold
--values=0,0.001,0.003,0.01), on `keel datagen` sets and on real binary sets
(scripts/bench/real_data.py's loaders and CSV writer, a 75/25 split). Each
figure is the test ROC AUC (real sets: the model scored on the held-out 25% by
`keel predict`, AUC by scikit-learn; datagen sets: the job's validation AUC).
Prints every round and the medians side by side with the largest gap to the first value.

  /usr/bin/python3 scripts/bench/wire_precision.py --keel build/keel [--rounds 3]
      [--sets breast_cancer,fair,anes96] [--datagen_rows 200000] [--precisions fp32,bf16,fp16]
      [--flag wire_precision] [--values as --precisions]
      [--jsonl FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_data  # noqa: E402  (its loaders and writers; needs python3-sklearn)
from sklearn.metrics import roc_auc_score  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

PRECISIONS = ("fp32", "bf16", "fp16")
JOBS = (("linear_learner", "linear"), ("factorization_machines", "FM"))


def run(keel, arguments, log):
    with open(log, "w") as out:
        done = subprocess.run([keel] + arguments, stdout=out, stderr=subprocess.STDOUT,
                              timeout=900)
    if done.returncode != 0:
        with open(log) as text:
            raise RuntimeError(f"keel {' '.join(arguments[:2])} failed: {text.read()[-1500:]}")


def real_auc(keel, work, name, job, flag, precision, files, feature_dim, tag):
    model = os.path.join(work, f"{name}-{job}-{precision}-{tag}")
    run(keel, ["launch", "--servers=1", "--workers=2", f"--job={job}",
               "--predictor_type=binary_classifier", f"--feature_dim={feature_dim}",
               f"--train={files['train']}", f"--model_dir={model}", "--progress=none",
               "--metrics=off", f"--{flag}={precision}"], model + ".log")
    out = model + ".predictions.csv"
    run(keel, ["predict", f"--model_dir={model}", f"--data={files['test']}",
               "--data_format=csv", f"--out={out}"], model + ".predict.log")
    labels, scores = [], []
    with open(out) as text:
        for line in text:
            label, score = line.strip().split(",")[:2]
            labels.append(float(label))
            scores.append(float(score))
    return roc_auc_score(files["labels"], scores)


def datagen_auc(keel, work, data, job, flag, precision, tag):
    model = os.path.join(work, f"datagen-{job}-{precision}-{tag}")
    flags = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs",
                         f"{job}.flags")
    run(keel, ["launch", "--servers=2", "--workers=2", f"--flagfile={flags}",
               f"--train={data}/train", f"--validation={data}/validation", f"--model_dir={model}",
               "--progress=none", "--metrics=off", f"--{flag}={precision}"],
        model + ".log")
    with open(os.path.join(model, "metrics.json")) as text:
        return json.load(text)["validation:roc_auc_score"]


def make_cases(keel, work, sets, datagen_rows, flag):
    """The sets to train on, written under `work`: a list of (set, job label,
    runner(value of --flag, tag) -> AUC); datagen sets of `datagen_rows` (0: none)."""
    cases = []  # (set, job label, runner(precision, tag))
    for name in sets:
        load, task, _ = real_data.SETS[name]
        assert task == "binary", f"{name} is not a binary set"
        features, labels = load()
        x_train, x_test, y_train, y_test = train_test_split(features, labels, test_size=0.25,
                                                            random_state=0)
        files = {"train": os.path.join(work, f"{name}-train.csv"),
                 "test": os.path.join(work, f"{name}-test.csv"), "labels": y_test}
        real_data.write_csv(files["train"], x_train, y_train, task)
        real_data.write_csv(files["test"], x_test, y_test, task)
        for job, label in JOBS:
            cases.append((name, label, lambda p, t, n=name, j=job, f=files, d=features.shape[1]:
                          real_auc(keel, work, n, j, flag, p, f, d, t)))
    if datagen_rows > 0:
        for model, (job, label) in zip(("linear", "fm"), JOBS):
            data = os.path.join(work, f"datagen-{model}")
            run(keel, ["datagen", f"--model={model}", f"--rows={datagen_rows}",
                       "--features=20000", "--nnz=20", "--num_factors=4", "--seed=11",
                       f"--out={data}"], data + ".log")
            cases.append((f"datagen {model}", label, lambda p, t, d=data, j=job:
                          datagen_auc(keel, work, d, j, flag, p, t)))
    return cases


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--keel", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sets", default="breast_cancer,fair,anes96")
    parser.add_argument("--datagen_rows", type=int, default=200000)
    parser.add_argument("--precisions", "--values", dest="values", default=",".join(PRECISIONS))
    parser.add_argument("--flag", default="wire_precision")
    parser.add_argument("--jsonl", default="")
    options = parser.parse_args()
    precisions = [p for p in options.values.split(",") if p]
    base = precisions[0]  # what the others are compared with
    keel = os.path.realpath(options.keel)
    work = tempfile.mkdtemp(prefix="keel-wire-precision-")
    cases = make_cases(keel, work, [s for s in options.sets.split(",") if s],
                       options.datagen_rows, options.flag)
    figures = {}
    journal = open(options.jsonl, "a") if options.jsonl else None
    for round_number in range(1, options.rounds + 1):
        for set_name, label, runner in cases:
            for precision in precisions:
                auc = runner(precision, f"r{round_number}")
                figures.setdefault((set_name, label, precision), []).append(auc)
                line = {"round": round_number, "set": set_name, "job": label,
                        options.flag: precision, "auc": round(auc, 6)}
                print(json.dumps(line), flush=True)
                if journal:
                    journal.write(json.dumps(line) + "\n")
    print("\n| set | job | " + " | ".join(precisions) + f" | largest gap to {base} |")
    print("| --- | --- | " + "--- | " * len(precisions) + "--- |")
    worst = 0.0
    for set_name, label, _ in cases:
        medians = {p: statistics.median(figures[(set_name, label, p)]) for p in precisions}
        gap = max(abs(medians[p] - medians[base]) for p in precisions)
        worst = max(worst, gap)
        print(f"| {set_name} | {label} | " + " | ".join(f"{medians[p]:.4f}" for p in precisions) +
              f" | {gap:.4f} |")
    print(f"\nlargest median gap to {base}: {worst:.4f} (rounds: {options.rounds}; work: {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
