"""Keel's default learners on public real data sets, beside scikit-learn.

Run by scripts/bench/real_data.sh, which says how to call it. Each set is one
that Debian ships (python3-sklearn's bundled sets, python3-statsmodels' sets),
raw as published: no feature is standardized. Each is split 75/25 by
scikit-learn's train_test_split (random_state 0; a set with fewer than 100
test rows: the mean over random_state 0 to 4), and each split is written in
the three formats Keel reads: CSV (label, then every feature, zeros written),
libsvm (label, then 1-based index:value pairs, zeros left out) and sparse
recordIO-protobuf (SageMaker's: RecordIO framing, an aialgs.data.Record whose
features["values"] is a float32 tensor with keys and shape). Keel trains with
its defaults (only --job, --predictor_type, --num_classes for multiclass,
--feature_dim and the data; no validation channel) on 1 server and 2 workers,
and `keel predict` scores the test rows; the metrics come from those
predictions. Two workers train asynchronously, so a run's figures vary: each
split is trained --runs times, and the table gives the median over the runs
(of the mean over the splits), then the lowest and highest run. scikit-learn
fits StandardScaler + LogisticRegression(max_iter=5000) or Ridge() on the same
split, once (it is deterministic).

A file Keel misreads must not look right, so every split is checked: each
model's training examples per epoch and held-out rows must be the training
rows, each
prediction file must have a line per test row, and the CSV linear model's
scores of the test rows in the three formats must agree.
"""

import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import time

import numpy as np
import sklearn.datasets
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import accuracy_score, mean_squared_error, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

FORMATS = ("csv", "libsvm", "recordio-protobuf")
FORMAT_NAMES = {"csv": "CSV", "libsvm": "libsvm", "recordio-protobuf": "recordIO"}
JOBS = ("linear_learner", "factorization_machines")
JOB_NAMES = {"linear_learner": "linear", "factorization_machines": "FM"}
PREDICTOR_TYPES = {
    "binary": "binary_classifier",
    "multiclass": "multiclass_classifier",
    "regression": "regressor",
}
MIN_TEST_ROWS = 100  # below this, the mean over SPLIT_SEEDS
SPLIT_SEEDS = (0, 1, 2, 3, 4)


# The data sets: name -> (loader, task, where it comes from). A loader returns
# the features (rows x columns, float64) and the labels (0/1, a class id from
# 0, or a number).


def _sklearn(load, **options):
    def loader():
        features, labels = load(return_X_y=True, **options)
        return np.asarray(features, dtype=np.float64), np.asarray(labels, dtype=np.float64)

    return loader


def _boston():
    # load_boston left scikit-learn in 1.2; its CSV is still shipped: a line
    # of counts, a header, then 13 features and MEDV (the label) per row.
    path = os.path.join(os.path.dirname(sklearn.datasets.__file__), "data",
                        "boston_house_prices.csv")
    table = np.loadtxt(path, delimiter=",", skiprows=2)
    return table[:, :-1], table[:, -1]


def _statsmodels(name, label, binarize=False):
    def loader():
        import statsmodels.api as sm

        data = getattr(sm.datasets, name).load_pandas().data
        labels = data[label].to_numpy(dtype=np.float64)
        features = data.drop(columns=[label]).to_numpy(dtype=np.float64)
        return features, (labels > 0).astype(np.float64) if binarize else labels

    return loader


SETS = {
    "breast_cancer": (_sklearn(sklearn.datasets.load_breast_cancer), "binary",
                      "scikit-learn load_breast_cancer (Wisconsin diagnostic)"),
    "fair": (_statsmodels("fair", "affairs", binarize=True), "binary",
             "statsmodels fair (Redbook survey, 1974): affairs > 0"),
    "anes96": (_statsmodels("anes96", "vote"), "binary",
               "statsmodels anes96 (American National Election Survey 1996): vote"),
    "digits": (_sklearn(sklearn.datasets.load_digits), "multiclass",
               "scikit-learn load_digits (8x8 images, pixel counts 0-16)"),
    "wine": (_sklearn(sklearn.datasets.load_wine), "multiclass", "scikit-learn load_wine"),
    "iris": (_sklearn(sklearn.datasets.load_iris), "multiclass", "scikit-learn load_iris"),
    "diabetes": (_sklearn(sklearn.datasets.load_diabetes, scaled=False), "regression",
                 "scikit-learn load_diabetes(scaled=False)"),
    "boston": (_boston, "regression", "scikit-learn's boston_house_prices.csv: MEDV"),
    "randhie": (_statsmodels("randhie", "mdvis"), "regression",
                "statsmodels randhie (RAND Health Insurance Experiment): mdvis"),
}


# The three formats.


def _text(value):
    """A float32's shortest decimal, so that every format holds the same float."""
    return str(np.float32(value))


def _label_text(label, task):
    return str(int(label)) if task != "regression" else _text(label)


def write_csv(path, features, labels, task):
    with open(path, "w") as out:
        for row, label in zip(features, labels):
            out.write(",".join([_label_text(label, task)] + [_text(v) for v in row]) + "\n")


def write_libsvm(path, features, labels, task):
    with open(path, "w") as out:
        for row, label in zip(features, labels):
            pairs = [f"{j + 1}:{_text(v)}" for j, v in enumerate(row) if np.float32(v) != 0]
            out.write(" ".join([_label_text(label, task)] + pairs) + "\n")


RECORDIO_MAGIC = 0xCED7230A


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number, payload):
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _float32_tensor(values, keys=None, shape=None):
    """aialgs.data.Float32Tensor: values 1, keys 2, shape 3, all packed."""
    out = b""
    if len(values):
        out += _field(1, struct.pack(f"<{len(values)}f", *values))
    if keys is not None and len(keys):
        out += _field(2, b"".join(_varint(int(k)) for k in keys))
    if shape is not None:
        out += _field(3, b"".join(_varint(int(s)) for s in shape))
    return out


def _values_entry(tensor):
    """A map<string, Value> entry "values" -> Value{float32_tensor (field 2)}."""
    return _field(1, b"values") + _field(2, _field(2, tensor))


def _record(row, label):
    """aialgs.data.Record: features (field 1) sparse with shape, label (field 2)."""
    keys = np.flatnonzero(row.astype(np.float32))
    features = _float32_tensor(row[keys].astype(np.float32), keys, [len(row)])
    return _field(1, _values_entry(features)) + _field(2, _values_entry(_float32_tensor([label])))


def _recordio_part(flag, payload):
    header = struct.pack("<II", RECORDIO_MAGIC, flag << 29 | len(payload))
    return header + payload + b"\0" * (-len(payload) % 4)


def _recordio(payload):
    """One RecordIO record: cut into parts where the magic sits at a 4-byte-aligned offset."""
    magic = struct.pack("<I", RECORDIO_MAGIC)
    parts, begin = [], 0
    for at in range(0, len(payload) - len(payload) % 4, 4):
        if payload[at:at + 4] == magic:
            parts.append(payload[begin:at])
            begin = at + 4
    parts.append(payload[begin:])
    if len(parts) == 1:
        return _recordio_part(0, parts[0])
    flags = [1] + [2] * (len(parts) - 2) + [3]
    return b"".join(_recordio_part(f, p) for f, p in zip(flags, parts))


def write_recordio(path, features, labels, task):
    del task  # every label is a float32
    with open(path, "wb") as out:
        for row, label in zip(features, labels):
            out.write(_recordio(_record(row, label)))


WRITERS = {"csv": write_csv, "libsvm": write_libsvm, "recordio-protobuf": write_recordio}
EXTENSIONS = {"csv": "csv", "libsvm": "libsvm", "recordio-protobuf": "recordio"}


# Metrics.


def metrics(task, labels, predicted, scores):
    """binary: accuracy, roc_auc; multiclass: accuracy; regression: mse."""
    if task == "regression":
        return {"mse": float(mean_squared_error(labels, scores))}
    result = {"accuracy": float(accuracy_score(labels, predicted))}
    if task == "binary":
        result["roc_auc"] = float(roc_auc_score(labels, scores))
    return result


def sklearn_figures(task, train, test):
    (x_train, y_train), (x_test, y_test) = train, test
    if task == "regression":
        model = make_pipeline(StandardScaler(), Ridge()).fit(x_train, y_train)
        scores = model.predict(x_test)
        return metrics(task, y_test, scores, scores)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000))
    model.fit(x_train, y_train)
    probabilities = model.predict_proba(x_test)
    return metrics(task, y_test, model.predict(x_test), probabilities[:, -1])


def read_predictions(path, task):
    """keel predict's CSV: "L,S" (binary), "L,S0,S1,..." (multiclass), "S" (regression)."""
    table = np.loadtxt(path, delimiter=",", ndmin=2)
    if task == "regression":
        return table[:, 0], table[:, 0]
    if task == "binary":
        return table[:, 0], table[:, 1]
    return table[:, 0], table[:, 1:]


# Keel.


class Keel:
    def __init__(self, binary, work, timeout):
        self.binary = binary
        self.work = work
        self.timeout = timeout

    def _run(self, arguments, log):
        with open(log, "w") as out:
            try:
                done = subprocess.run([self.binary] + arguments, stdout=out,
                                      stderr=subprocess.STDOUT, timeout=self.timeout + 30,
                                      env=dict(os.environ, TMPDIR=self.work))
                failed = done.returncode != 0 and f"exit status {done.returncode}"
            except subprocess.TimeoutExpired:
                failed = f"no end after {self.timeout + 30} s"
        if failed:
            with open(log) as text:
                tail = text.read()[-2000:]
            raise RuntimeError(f"keel {arguments[0]} failed ({failed}): {tail}")

    def train(self, job, task, classes, feature_dim, train_file, model_dir, log):
        arguments = ["launch", "--servers=1", "--workers=2", f"--job={job}",
                     f"--predictor_type={PREDICTOR_TYPES[task]}", f"--feature_dim={feature_dim}",
                     f"--train={train_file}", f"--model_dir={model_dir}",
                     f"--timeout={self.timeout}", "--progress=none", "--metrics=off"]
        if task == "multiclass":
            arguments.append(f"--num_classes={classes}")
        self._run(arguments, log)
        with open(os.path.join(model_dir, "metrics.json")) as text:
            return json.load(text)

    def predict(self, model_dir, data_format, data, out, log):
        # Without --data_format, keel predict reads the model's training format.
        self._run(["predict", f"--model_dir={model_dir}", f"--data={data}",
                   f"--data_format={data_format}", f"--out={out}"], log)


def run_split(keel, name, task, features, labels, seed, runs, journal):
    """Every figure of one split: {learner: [{metric: value} or None (failed), one per run]}
    (scikit-learn's once, it is deterministic), and the format check's largest differences."""
    x_train, x_test, y_train, y_test = train_test_split(features, labels, test_size=0.25,
                                                        random_state=seed)
    classes = int(labels.max()) + 1 if task == "multiclass" else 0
    folder = os.path.join(keel.work, f"{name}-{seed}")
    os.makedirs(folder)
    files = {}
    for data_format in FORMATS:
        for part, (x, y) in (("train", (x_train, y_train)), ("test", (x_test, y_test))):
            path = os.path.join(folder, f"{part}.{EXTENSIONS[data_format]}")
            WRITERS[data_format](path, x, y, task)
            files[data_format, part] = path

    figures = {"sklearn": [sklearn_figures(task, (x_train, y_train), (x_test, y_test))]}
    journal({"set": name, "split": seed, "learner": "sklearn", **figures["sklearn"][0]})
    differences = {}
    for run in range(runs):
        for job in JOBS if task != "multiclass" else JOBS[:1]:
            for data_format in FORMATS:
                learner = f"{JOB_NAMES[job]} {FORMAT_NAMES[data_format]}"
                model_dir = os.path.join(folder, f"model-{run}-{job}-{EXTENSIONS[data_format]}")
                try:
                    result, seconds = train_and_score(keel, job, task, (classes, features.shape[1]),
                                                      files, data_format, model_dir,
                                                      (y_train, y_test))
                    journal({"set": name, "split": seed, "run": run, "learner": learner, **result,
                             "train_seconds": round(seconds, 3)})
                    if run == 0 and job == JOBS[0] and data_format == "csv":
                        differences = check_formats(keel, model_dir, files, task)
                except (RuntimeError, OSError, ValueError) as error:
                    result = None
                    journal({"set": name, "split": seed, "run": run, "learner": learner,
                             "error": str(error)})
                    print(f"real_data: {name} split {seed} run {run} {learner}: {error}",
                          file=sys.stderr)
                figures.setdefault(learner, []).append(result)
                shutil.rmtree(model_dir, ignore_errors=True)
    if differences:
        journal({"set": name, "split": seed, "check": "same scores in every format",
                 **differences})
    return figures, differences


def train_and_score(keel, job, task, shape, files, data_format, model_dir, labels):
    """Trains on the split's training file in `data_format`, scores its test file in the
    same format: the metrics and the training seconds. Raises RuntimeError if Keel fails or
    did not read every row."""
    (classes, feature_dim), (y_train, y_test) = shape, labels
    start = time.monotonic()
    trained = keel.train(job, task, classes, feature_dim, files[data_format, "train"],
                         model_dir, model_dir + ".log")
    seconds = time.monotonic() - start
    predictions = model_dir + ".predictions.csv"
    keel.predict(model_dir, data_format, files[data_format, "test"], predictions,
                 model_dir + ".predict.log")
    predicted, scores = read_predictions(predictions, task)
    problems = []
    # Without --validation the job holds out some training rows (--holdout).
    read = trained.get("train:examples_per_epoch", 0) + trained.get("train:held_out_examples", 0)
    if read != len(y_train):
        problems.append(f"trained on {trained.get('train:examples_per_epoch')} examples an "
                        f"epoch and held out {trained.get('train:held_out_examples', 0)}, "
                        f"not {len(y_train)} in all")
    if len(predicted) != len(y_test):
        problems.append(f"{len(predicted)} predictions for {len(y_test)} test rows")
    if problems:
        raise RuntimeError("; ".join(problems))
    return metrics(task, y_test, predicted, scores), seconds


def check_formats(keel, model_dir, files, task):
    """The scores a model gives the test rows read from libsvm and recordIO, against those it
    gave them read from CSV (model_dir's predictions): the largest relative difference."""
    _, csv_scores = read_predictions(model_dir + ".predictions.csv", task)
    differences = {}
    for data_format in FORMATS[1:]:
        out = f"{model_dir}.check.{EXTENSIONS[data_format]}.csv"
        keel.predict(model_dir, data_format, files[data_format, "test"], out, out + ".log")
        _, scores = read_predictions(out, task)
        if np.shape(scores) != np.shape(csv_scores):
            differences[data_format] = float("inf")
        else:
            scale = max(1.0, float(np.max(np.abs(csv_scores))))
            differences[data_format] = float(np.max(np.abs(scores - csv_scores))) / scale
    return differences


LEARNERS = ["sklearn"] + [f"{JOB_NAMES[j]} {FORMAT_NAMES[f]}" for j in JOBS for f in FORMATS]
METRIC_NAMES = {"accuracy": "accuracy", "roc_auc": "ROC AUC", "mse": "MSE"}
TASK_METRICS = {"binary": ["accuracy", "roc_auc"], "multiclass": ["accuracy"],
                "regression": ["mse"]}


def _per_run(splits, metric):
    """A learner's figure of each run, the mean over the splits; None if a run failed."""
    if splits is None:
        return None
    figures = []
    for run in zip(*splits):
        if any(figure is None for figure in run):
            return None
        figures.append(float(np.mean([figure[metric] for figure in run])))
    return figures


def _number(value, metric):
    if metric != "mse":
        return f"{value:.4f}"
    return f"{value:.2f}" if value < 1000 else f"{value:.0f}"


def table(rows, spread=False):
    """The Markdown table of each learner's median over the runs, or (spread) of its lowest
    and highest run."""
    learners = LEARNERS[1:] if spread else LEARNERS
    header = ["set", "rows", "features", "task", "metric"] + [
        "scikit-learn" if learner == "sklearn" else f"Keel {learner}" for learner in learners]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for name, shape, task, per_learner in rows:
        splits = len(per_learner["sklearn"])
        for metric in TASK_METRICS[task]:
            label = METRIC_NAMES[metric] + (f", mean of {splits} splits" if splits > 1 else "")
            cells = []
            for learner in learners:
                figures = _per_run(per_learner.get(learner), metric)
                if learner not in per_learner:
                    cells.append("-")
                elif figures is None:
                    cells.append("failed")
                elif spread:
                    cells.append(f"{_number(min(figures), metric)}-{_number(max(figures), metric)}")
                else:
                    cells.append(_number(float(np.median(figures)), metric))
            row = [name, str(shape[0]), str(shape[1]), task, label] + cells
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keel", required=True, help="the keel binary")
    parser.add_argument("--work", required=True, help="an empty folder for data, models, logs")
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated: " + ",".join(SETS))
    parser.add_argument("--out", help="also write the Markdown table here")
    parser.add_argument("--jsonl", help="append every figure here as a JSON line")
    parser.add_argument("--runs", type=int, default=5, help="Keel's runs of each split")
    parser.add_argument("--timeout", type=int, default=300, help="seconds a keel run may take")
    options = parser.parse_args()
    names = [n for n in options.sets.split(",") if n]
    unknown = [n for n in names if n not in SETS]
    if unknown:
        parser.error(f"unknown set(s) {','.join(unknown)}; the sets: {','.join(SETS)}")

    keel = Keel(options.keel, options.work, options.timeout)
    journal_file = open(options.jsonl, "a") if options.jsonl else None
    binary = os.path.realpath(options.keel)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def journal(entry):
        if journal_file:
            journal_file.write(json.dumps({"started": started, "keel": binary, **entry}) + "\n")
            journal_file.flush()

    rows, mismatches, failures = [], [], 0
    for name in names:
        load, task, source = SETS[name]
        features, labels = load()
        test_rows = math.ceil(len(labels) * 0.25)  # train_test_split's count
        seeds = SPLIT_SEEDS if test_rows < MIN_TEST_ROWS else SPLIT_SEEDS[:1]
        print(f"real_data: {name}: {features.shape[0]} rows, {features.shape[1]} features, "
              f"{task}, {len(seeds)} split(s) ({source})", file=sys.stderr)
        per_learner = {}
        for seed in seeds:
            figures, differences = run_split(keel, name, task, features, labels, seed, options.runs,
                                            journal)
            for learner, value in figures.items():
                per_learner.setdefault(learner, []).append(value)
                failures += value.count(None)
            for data_format, difference in differences.items():
                if difference > 1e-5:
                    mismatches.append(f"{name} split {seed}: {data_format} scores differ from "
                                      f"CSV's by up to {difference:.3g} (relative)")
            shutil.rmtree(os.path.join(options.work, f"{name}-{seed}"))
        rows.append((name, features.shape, task, per_learner))

    text = (f"Medians of {options.runs} runs:\n\n{table(rows)}\n\n"
            f"Keel's lowest and highest run:\n\n{table(rows, spread=True)}")
    print(text)
    if options.out:
        with open(options.out, "w") as out:
            out.write(text + "\n")
    for mismatch in mismatches:
        print(f"real_data: format check failed: {mismatch}", file=sys.stderr)
    if failures:
        print(f"real_data: {failures} Keel run(s) failed", file=sys.stderr)
    return 1 if mismatches or failures else 0


if __name__ == "__main__":
    sys.exit(main())
