#!/usr/bin/env python3
"""Figures from what a Keel job recorded in its model folder (history.jsonl,
metrics.json, timeline/*.jsonl; the schema is in docs/ARCHITECTURE.md,
Observability), for the experiment scripts: they read these, not log text.

  timeline.py history MODEL_DIR FIGURE [OFFSET]
      "seconds value" per epoch of history.jsonl (seconds + OFFSET)
  timeline.py metric MODEL_DIR NAME
      metrics.json's NAME ("" if missing)
  timeline.py rate MODEL_DIR T0 [BIN]
      every worker process's examples/s summed in BIN-second bins (default 1),
      "bin_middle_seconds_since_T0 examples_per_s", from the workers' samples
  timeline.py event MODEL_DIR FILE EVENT [KEY=VALUE...] [--after T] [--last]
      the Unix time of the first (or last) line of timeline/FILE (scheduler,
      launch, worker-R) whose "event" is EVENT and whose members match
  timeline.py start MODEL_DIR
      the job's start (the earliest "start" line of launch, scheduler or a worker)
  timeline.py views MODEL_DIR T0
      "seconds_since_T0 servers epoch" per view the scheduler published
  timeline.py pushes MODEL_DIR T0
      "seconds_since_T0 longest_push_ms rank" per worker sample: the longest a
      push waited for its answer since the worker's sample before
"""
import glob
import json
import os
import sys


def lines(path):
    if not os.path.exists(path):
        return []
    result = []
    with open(path) as f:
        for number, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except ValueError as e:
                sys.exit("%s:%d: %s" % (path, number, e))
            if not isinstance(value, dict):
                sys.exit("%s:%d: a line must be a JSON object" % (path, number))
            result.append(value)
    return result


def history(model_dir, figure, offset=0.0):
    for line in lines(os.path.join(model_dir, "history.jsonl")):
        if figure in line and line[figure] is not None:
            print("%.3f %s" % (line["seconds"] + offset, line[figure]))


def metric(model_dir, name):
    path = os.path.join(model_dir, "metrics.json")
    if os.path.exists(path):
        with open(path) as f:
            value = json.load(f).get(name)
        if value is not None:
            print(value)


def rate(model_dir, t0, width=1.0):
    """Each process's examples (a worker file's "start" line begins a process:
    its counts start again) spread evenly between consecutive samples."""
    bins = {}
    for path in glob.glob(os.path.join(model_dir, "timeline", "worker-*.jsonl")):
        previous = None
        for line in lines(path):
            if line["event"] == "start":
                previous = (line["time"] - t0, 0.0)
            if line["event"] != "sample":
                continue
            point = (line["time"] - t0, float(line["examples"]))
            if previous and point[1] > previous[1] and point[0] > previous[0]:
                speed = (point[1] - previous[1]) / (point[0] - previous[0])
                b = int(previous[0] // width)
                while b * width < point[0]:
                    lo, hi = max(b * width, previous[0]), min((b + 1) * width, point[0])
                    if hi > lo:
                        bins[b] = bins.get(b, 0.0) + speed * (hi - lo)
                    b += 1
            previous = point
    if not bins:
        return
    for b in range(min(bins), max(bins) + 1):
        print("%.1f %.0f" % ((b + 0.5) * width, bins.get(b, 0.0) / width))


def event(model_dir, name, kind, conditions, after=None, last=False):
    found = None
    for line in lines(os.path.join(model_dir, "timeline", name + ".jsonl")):
        if line.get("event") != kind or (after is not None and line["time"] <= after):
            continue
        if all(str(line.get(k)).lower() == v.lower() for k, v in conditions):
            found = line["time"]
            if not last:
                break
    if found is not None:
        print("%.3f" % found)


def start(model_dir):
    times = []
    for path in glob.glob(os.path.join(model_dir, "timeline", "*.jsonl")):
        times += [l["time"] for l in lines(path) if l.get("event") == "start"]
    if times:
        print("%.3f" % min(times))


def views(model_dir, t0):
    for line in lines(os.path.join(model_dir, "timeline", "scheduler.jsonl")):
        if line.get("event") == "view":
            print("%.3f %d %d" % (line["time"] - t0, line["servers"], line["epoch"]))


def pushes(model_dir, t0):
    for path in sorted(glob.glob(os.path.join(model_dir, "timeline", "worker-*.jsonl"))):
        for line in lines(path):
            if line.get("event") == "sample" and line.get("longest_push_ms") is not None:
                print("%.3f %.3f %d" % (line["time"] - t0, line["longest_push_ms"], line["rank"]))


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    command, model_dir = argv[1], argv[2]
    if command == "history" and len(argv) in (4, 5):
        history(model_dir, argv[3], float(argv[4]) if len(argv) == 5 else 0.0)
    elif command == "metric" and len(argv) == 4:
        metric(model_dir, argv[3])
    elif command == "rate" and len(argv) in (4, 5):
        rate(model_dir, float(argv[3]), float(argv[4]) if len(argv) == 5 else 1.0)
    elif command == "event" and len(argv) >= 5:
        rest, after, last = argv[5:], None, False
        conditions = []
        i = 0
        while i < len(rest):
            if rest[i] == "--after":
                after = float(rest[i + 1])
                i += 2
                continue
            if rest[i] == "--last":
                last = True
            else:
                key, _, value = rest[i].partition("=")
                conditions.append((key, value))
            i += 1
        event(model_dir, argv[3], argv[4], conditions, after, last)
    elif command == "start" and len(argv) == 3:
        start(model_dir)
    elif command == "views" and len(argv) == 4:
        views(model_dir, float(argv[3]))
    elif command == "pushes" and len(argv) == 4:
        pushes(model_dir, float(argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
