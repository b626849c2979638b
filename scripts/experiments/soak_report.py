#!/usr/bin/env python3
"""The report of a soak (scripts/experiments/soak.sh).

  soak_report.py OUT MINUTES

Reads OUT/samples.tsv (time, role, rank, pid, RSS kB, open descriptors), OUT/code,
OUT/model/exact_sum.json, OUT/membership.jsonl and OUT/events.jsonl; writes
OUT/soak.md (per process: its life, RSS and descriptors at the start and end
of its life after warm-up, and their least-squares slopes per hour; the
faults fired; the job's check) and OUT/soak.svg (RSS and descriptors of each
process over time). Warm-up: a process's first WARMUP_S (120) seconds.
"""
import json
import os
import sys

WARMUP_S = 120.0


def read_samples(path):
    processes = {}
    with open(path) as f:
        next(f, None)
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 6:
                continue
            t, role, rank, pid, rss, fds = parts
            key = (role, rank, int(pid))
            processes.setdefault(key, []).append((float(t), int(rss), int(fds)))
    return processes


def slope(points):
    """Least-squares slope of (x, y) points; 0 with fewer than 2."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def read_json_lines(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass
    return rows


def svg(processes, path, minutes):
    width, height, left, top = 900, 420, 60, 20
    plot_h = (height - 3 * top) // 2
    span = max(60.0 * minutes, max((s[-1][0] for s in processes.values()), default=1.0))
    rss_max = max((r for s in processes.values() for _, r, _ in s), default=1) * 1.1
    fd_max = max((d for s in processes.values() for _, _, d in s), default=1) * 1.1
    colors = {"scheduler": "#555", "server": "#1f77b4", "worker": "#d62728"}
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="11">' % (width, height)]
    for i, (name, top_y, vmax, index) in enumerate(
            [("RSS (MB)", top, rss_max / 1024, 1), ("open descriptors", 2 * top + plot_h, fd_max, 2)]):
        out.append('<text x="%d" y="%d">%s; x: minutes into the soak</text>' % (left, top_y - 5, name))
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#ccc"/>' % (
            left, top_y, width - left - 10, plot_h))
        out.append('<text x="5" y="%d">%.0f</text>' % (top_y + 10, vmax))
        for (role, rank, pid), series in sorted(processes.items()):
            pts = []
            for t, rss, fds in series:
                v = rss / 1024 if index == 1 else fds
                x = left + (width - left - 10) * t / span
                y = top_y + plot_h - plot_h * v / vmax
                pts.append("%.1f,%.1f" % (x, y))
            out.append('<polyline fill="none" stroke="%s" stroke-width="1" points="%s">'
                       '<title>%s %s pid %d</title></polyline>' % (
                           colors.get(role, "#000"), " ".join(pts), role, rank, pid))
    out.append('<text x="%d" y="%d">scheduler grey, servers blue, workers red</text>' % (
        left, height - 5))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main(out, minutes):
    minutes = int(minutes)
    processes = read_samples(os.path.join(out, "samples.tsv"))
    code = open(os.path.join(out, "code")).read().strip() if os.path.exists(
        os.path.join(out, "code")) else "?"
    report = {}
    path = os.path.join(out, "model", "exact_sum.json")
    if os.path.exists(path):
        with open(path) as f:
            report = json.load(f)
    events = read_json_lines(os.path.join(out, "events.jsonl"))
    fired = {}
    for e in events:
        if e.get("event") in ("kill", "stop", "continue", "restart", "skipped", "not_fired"):
            fired[e["event"]] = fired.get(e["event"], 0) + 1
    lost = [e for e in read_json_lines(os.path.join(out, "membership.jsonl"))
            if e.get("event") == "range_lost"]
    lines = [
        "Soak of %d minutes: keel launch exited %s; faults %s; exact_sum: %s keys checked, "
        "%s violation(s) (%s lost, %s doubled), %s key(s) in announced lost ranges; "
        "ranges declared lost: %d; pushes acknowledged %s." % (
            minutes, code, ", ".join("%s %d" % kv for kv in sorted(fired.items())) or "none",
            report.get("keys_checked", "?"), report.get("violations", "?"),
            report.get("lost", "?"), report.get("doubled", "?"),
            report.get("announced_lost", "?"), len(lost),
            (report.get("pushes") or {}).get("acknowledged", "?")),
        "",
        "Per process (after its first %d s): RSS and open descriptors at the start and the end, "
        "and their least-squares slopes per hour." % WARMUP_S,
        "",
        "| role | rank | pid | life (min) | RSS MB start -> end | RSS slope MB/h | fds start -> end "
        "| fds slope /h |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (role, rank, pid), series in sorted(processes.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                             kv[1][0][0])):
        life = (series[-1][0] - series[0][0]) / 60
        steady = [s for s in series if s[0] - series[0][0] >= WARMUP_S]
        if len(steady) < 3:
            lines.append("| %s | %s | %d | %.1f | (too short) | | | |" % (role, rank, pid, life))
            continue
        rss_slope = slope([(t / 3600, r / 1024) for t, r, _ in steady])
        fd_slope = slope([(t / 3600, d) for t, _, d in steady])
        lines.append("| %s | %s | %d | %.1f | %.1f -> %.1f | %+.2f | %d -> %d | %+.2f |" % (
            role, rank, pid, life, steady[0][1] / 1024, steady[-1][1] / 1024, rss_slope,
            steady[0][2], steady[-1][2], fd_slope))
    with open(os.path.join(out, "soak.md"), "w") as f:
        f.write("\n".join(lines) + "\n\n![RSS and descriptors over time](soak.svg)\n")
    svg(processes, os.path.join(out, "soak.svg"), minutes)
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
