#!/usr/bin/env python3
"""Random fault schedules for scripts/experiments/chaos.sh, each run's outcome,
and the table and plot of a whole experiment.

  chaos.py schedule SEED REPLICATION WINDOW [SCHEDULER [PARTITIONS [MODE [HB_TIMEOUT]]]]
      the schedule of seed SEED as shell assignments (servers=, workers=,
      faults=, down=): 2-3 servers, 2 workers, 3-8 fault items at random
      times in [2 s, WINDOW s] of the launch (kill then restart, stop with a
      duration, restart; of servers, workers and, when SCHEDULER is 1, the
      scheduler (SCHEDULER "stop": the scheduler is only stopped, never killed); drops and delays of one process's outgoing data messages;
      when PARTITIONS is 1, one process cut from all the others for a while).
      With REPLICATION 1 or more, servers are down one at a time: each server
      fault holds a down-interval (from the fault until its process is back
      plus RECOVERY_S for the view change and the range copy) and no two
      overlap, so every key range keeps a live replica. With REPLICATION 0
      the same rule holds (one server at a time) and what the killed or
      stopped servers held is the allowed loss (see outcome).
      MODE "chain" (REPLICATION 1 or more) aims two overlapping faults at the
      servers of one key range's chain instead: 3 servers; a backup stopped
      past HB_TIMEOUT (default 2) and the primary killed while it is out; both
      killed within the copy window (the primary killed and started again,
      then the backup it copies from killed during the copy); or the primary
      restarted, then its copy source restarted during the copy. Plus 0-2
      worker or transport faults. With one backup the range may lose every
      replica (which the scheduler must announce); with two it must not.
      The same seed gives the same schedule: Python's random.Random(SEED).
  chaos.py outcome RUN_DIR JOB REPLICATION DOWN SEED SERVERS FAULTS REPLAY
      one JSON line (with the run's SEED, SERVERS, FAULTS and REPLAY command) for a job of a run: RUN_DIR holds the job's exit code
      (JOB.code), wall time (JOB.wall), event log (JOB.events.jsonl) and model
      folder (JOB.model/). The verdict: "ok" when the job exited 0 and
      (exact_sum) found no wrong sum; "ok, loss announced" when exact_sum's
      only lost keys are in ranges the scheduler declared lost (every replica
      left: exact_sum.json's announced_lost) and the job exited 0, or 3 (a
      replicated job that lost data); any lost key outside an announced range
      (silent loss) or any doubled key is a violation. DOWN (comma list of
      ranks that were killed, restarted or stopped) is kept for the table.
  chaos.py report OUT
      OUT/results.jsonl (the outcome lines, with each run's schedule) ->
      OUT/chaos.md (a table, one row per job) and OUT/chaos.svg (each run's
      faults on its time line, per job; red: a failure).
"""
import html
import json
import os
import random
import sys

RECOVERY_S = 4.0  # after a server is back: view change, range copy, before the next server fault
SCHEDULER_RECOVERY_S = 3.0


class Generator:
    def __init__(self, seed, replication, window, scheduler, partitions=False):
        self.rng = random.Random(seed)
        self.replication = replication
        self.window = window
        self.scheduler = scheduler
        self.partitions = partitions
        self.servers = self.rng.choice([2, 3])
        self.workers = 2
        self.items = []  # (time or None, text)
        self.server_busy = []  # [begin, end) intervals, any server
        self.busy = {}  # "role:rank" -> [begin, end) intervals of that process
        self.transport = set()  # (action, role, rank) already given
        self.down_servers = set()

    def free(self, intervals, begin, end):
        return all(end <= b or begin >= e for b, e in intervals)

    def hold(self, role, rank, interval):
        """Books `interval` (down, then recovering) for process role:rank and returns its name
        "role:rank"; None when the process, or for a server any server, is busy then."""
        name = "%s:%s" % (role, rank)
        if not self.free(self.busy.get(name, []), *interval):
            return None
        if role == "server" and not self.free(self.server_busy, *interval):
            return None
        self.busy.setdefault(name, []).append(interval)
        if role == "server":
            self.server_busy.append(interval)
            self.down_servers.add(rank)
        return name

    def process_fault(self, role, rank, room):
        """kill then restart, a stop, or a restart (kill and start at once); [] when it does
        not fit (`room` items left, or a down-interval would overlap)."""
        kind = self.rng.choice(["kill", "stop", "restart"])
        if role == "scheduler" and self.scheduler == "stop":
            kind = "stop"
        if kind == "kill" and room < 2:
            return []
        gap = 0.0 if kind == "restart" else round(self.rng.uniform(0.5, 4.0), 1)
        t = round(self.rng.uniform(2.0, self.window - gap), 1)
        back = t + gap
        margin = RECOVERY_S if role == "server" else SCHEDULER_RECOVERY_S if role == "scheduler" else 1.0
        interval = (t, back + margin)
        name = self.hold(role, rank, interval)
        if name is None:
            return []
        who = role if role == "scheduler" else name
        if kind == "kill":
            return [(t, "kill:%s@%gs" % (who, t)), (back, "restart:%s@%gs" % (who, back))]
        if kind == "stop":
            return [(t, "stop:%s@%gs+%gs" % (who, t, gap))]
        return [(t, "restart:%s@%gs" % (who, t))]

    def transport_fault(self, role, rank):
        action = self.rng.choice(["drop", "delay"])
        if (action, role, rank) in self.transport:
            return []
        self.transport.add((action, role, rank))
        if action == "drop":
            share = self.rng.choice([0.1, 0.5, 1, 2])
            return [(None, "drop:%s:%d=%g%%" % (role, rank, share))]
        # Every message of the process waits this long, and a worker has 4 pushes in flight:
        # 10 ms on a server made exact_sum's 48,000 pushes a worker take over 3 minutes.
        delay = self.rng.choice([0.5, 1, 2])
        jitter = self.rng.choice([0, delay / 2])
        return [(None, "delay:%s:%d=%gms~%gms" % (role, rank, delay, jitter))]

    def partition_fault(self, room):
        """One process cut from all the others for 0.5-4 s; a server cut off is down."""
        roles = ["server", "worker"] + (["scheduler"] if self.scheduler else [])
        role = self.rng.choice(roles)
        rank = 0 if role == "scheduler" else self.rng.randrange(
            self.servers if role == "server" else self.workers)
        gap = round(self.rng.uniform(0.5, 4.0), 1)
        t = round(self.rng.uniform(2.0, self.window - gap), 1)
        margin = RECOVERY_S if role == "server" else 1.0
        interval = (t, t + gap + margin)
        name = self.hold(role, rank, interval)
        if name is None:
            return []
        everyone = (["scheduler"] if self.scheduler else []) + \
            ["server:%d" % r for r in range(self.servers)] + \
            ["worker:%d" % r for r in range(self.workers)]
        alone = "scheduler" if role == "scheduler" else name
        others = ",".join(p for p in everyone if p != alone)
        return [(t, "partition:%s|%s@%gs+%gs" % (alone, others, t, gap))]

    def one(self, room):
        kinds = ["server", "server", "worker", "worker", "transport"]
        if self.scheduler:
            kinds.append("scheduler")
        if self.partitions:
            kinds.append("partition")
        kind = self.rng.choice(kinds)
        if kind == "partition":
            return self.partition_fault(room)
        if kind == "transport":
            role = self.rng.choice(["server", "worker"])
            count = self.servers if role == "server" else self.workers
            return self.transport_fault(role, self.rng.randrange(count))
        if kind == "scheduler":
            return self.process_fault("scheduler", 0, room)
        count = self.servers if kind == "server" else self.workers
        return self.process_fault(kind, self.rng.randrange(count), room)

    def chain_faults(self, hb_timeout):
        """Two overlapping faults on the servers of one key range's chain (MODE chain)."""
        first = self.rng.randrange(self.servers)
        chain = [(first + i) % self.servers for i in range(self.replication + 1)]
        primary, backup = chain[0], chain[1]
        pattern = self.rng.choice(["stop_backup_kill_primary", "kill_both_in_copy",
                                   "restart_during_copy"])
        t = round(self.rng.uniform(2.0, self.window - 6.0), 1)
        if pattern == "stop_backup_kill_primary":
            gap = round(self.rng.uniform(hb_timeout + 1.0, hb_timeout + 3.0), 1)
            kill = round(t + hb_timeout + self.rng.uniform(0.3, 0.8), 1)
            back = round(kill + self.rng.uniform(0.2, 1.0), 1)
            items = [(t, "stop:server:%d@%gs+%gs" % (backup, t, gap)),
                     (kill, "kill:server:%d@%gs" % (primary, kill)),
                     (back, "restart:server:%d@%gs" % (primary, back))]
            end = max(t + gap, back)
        elif pattern == "kill_both_in_copy":
            back = round(t + self.rng.uniform(0.3, 1.0), 1)
            second = round(back + self.rng.uniform(0.1, 0.6), 1)
            again = round(second + self.rng.uniform(0.3, 1.0), 1)
            items = [(t, "kill:server:%d@%gs" % (primary, t)),
                     (back, "restart:server:%d@%gs" % (primary, back)),
                     (second, "kill:server:%d@%gs" % (backup, second)),
                     (again, "restart:server:%d@%gs" % (backup, again))]
            end = again
        else:
            second = round(t + self.rng.uniform(0.2, 1.0), 1)
            items = [(t, "restart:server:%d@%gs" % (primary, t)),
                     (second, "restart:server:%d@%gs" % (backup, second))]
            end = second
        for rank in (primary, backup):
            self.busy.setdefault("server:%d" % rank, []).append((t, end + RECOVERY_S))
            self.down_servers.add(rank)
        self.server_busy.append((t, end + RECOVERY_S))
        self.items.extend(items)
        self.pattern = pattern

    def generate_chain(self, hb_timeout):
        self.servers = 3
        self.chain_faults(hb_timeout)
        extra = self.rng.randint(0, 2)
        attempts = 0
        while extra > 0 and attempts < 50:
            attempts += 1
            kind = self.rng.choice(["worker", "transport"])
            if kind == "transport":
                found = self.transport_fault("worker", self.rng.randrange(self.workers))
            else:
                found = self.process_fault("worker", self.rng.randrange(self.workers), extra)
            extra -= len(found) > 0
            self.items.extend(found)
        self.items.sort(key=lambda item: (item[0] is not None, item[0] or 0))
        return self

    def generate(self):
        wanted = self.rng.randint(3, 8)
        attempts = 0
        while len(self.items) < wanted and attempts < 200:
            attempts += 1
            self.items.extend(self.one(wanted - len(self.items)))
        self.items.sort(key=lambda item: (item[0] is not None, item[0] or 0))
        return self


def schedule(seed, replication, window, scheduler="0", partitions="0", mode="mixed",
             hb_timeout="2"):
    g = Generator(int(seed), int(replication), float(window),
                  scheduler if scheduler in ("1", "stop") else None, partitions == "1")
    if mode == "chain":
        if int(replication) < 1:
            sys.exit("chaos.py: MODE chain needs REPLICATION 1 or more")
        g.generate_chain(float(hb_timeout))
    else:
        g.generate()
    faults = ",".join(text for _, text in g.items)
    print("servers=%d" % g.servers)
    print("workers=%d" % g.workers)
    print("faults='%s'" % faults)
    print("down='%s'" % ",".join(str(r) for r in sorted(g.down_servers)))


def read_json_lines(path):
    result = []
    if not os.path.exists(path):
        return result
    with open(path) as f:
        for text in f:
            text = text.strip()
            if not text:
                continue
            try:
                result.append(json.loads(text))
            except ValueError:
                pass  # a line cut by a kill
    return result


def read_text(path, default=""):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def fault_counts(events):
    counts = {}
    for event in events:
        name = event.get("event")
        if name in ("kill", "stop", "continue", "restart", "partition", "heal", "skipped",
                    "not_fired", "restart_failed", "partition_failed"):
            counts[name] = counts.get(name, 0) + 1
    return counts


def exact_sum_verdict(report):
    """(violations, announced_lost, note) from exact_sum.json: lost keys outside the ranges
    the scheduler declared lost, and doubled keys anywhere, are violations."""
    if report is None:
        return None, 0, "no exact_sum.json"
    return report.get("violations", 0), report.get("announced_lost", 0), ""


def outcome(run_dir, job, replication, down, seed, servers, faults, replay):
    replication = int(replication)
    down = {int(r) for r in down.split(",") if r}
    code = int(read_text(os.path.join(run_dir, job + ".code"), "-1"))
    wall = float(read_text(os.path.join(run_dir, job + ".wall"), "0"))
    model = os.path.join(run_dir, job + ".model")
    events = read_json_lines(os.path.join(run_dir, job + ".events.jsonl"))
    line = {"seed": int(seed), "servers": int(servers), "replication": replication,
            "schedule": faults, "replay": replay, "job": job, "code": code,
            "wall_s": round(wall, 1), "faults": fault_counts(events)}
    ends = [e for e in events if e.get("event") == "job_over"]
    line["job_over_s"] = ends[0]["t"] if ends else None
    if job == "exact_sum":
        report = read_json(os.path.join(model, "exact_sum.json"))
        violations, announced, note = exact_sum_verdict(report)
        lost_ranges = [r.get("range") for r in (report or {}).get("ranges", [])
                       if r.get("announced_lost")]
        line.update(violations=violations, announced_lost=announced, lost_ranges=lost_ranges)
        # Each range the scheduler declared lost, and whether the check found the loss real.
        membership = read_json_lines(os.path.join(run_dir, job + ".membership.jsonl"))
        declared = sorted({e.get("range") for e in membership if e.get("event") == "range_lost"})
        line["declared_lost"] = declared
        # Ranges rebuilt from a removed server's copy, with the pushes it lacked by report.
        line["rebuilt_from_copy"] = [
            {"range": e.get("range"), "pushes_lost_at_least": e.get("pushes_lost_at_least")}
            for e in membership if e.get("event") == "range_rebuilt"]
        # Per lost range, the share of its updates the check found missing.
        line["missing_share"] = {
            str(r.get("range")): round(r["missing"] / r["expected"], 4)
            for r in (report or {}).get("ranges", [])
            if r.get("announced_lost") and r.get("expected")}
        if declared != sorted(lost_ranges):
            note = "declared %s, the last view marked %s" % (declared, sorted(lost_ranges))
        if report is not None:
            line.update(lost=report.get("lost"), doubled=report.get("doubled"),
                        pushes=report.get("pushes"))
        if violations is None:
            verdict = "fail: " + note + " (exit %d)" % code
        elif violations > 0:
            verdict = "fail: %d violation(s)" % violations
        elif code == 0 and not lost_ranges:
            verdict = "ok"
        elif note:
            verdict = "fail: " + note
        elif lost_ranges and (code == 0 or (code == 3 and replication > 0)):
            verdict = "ok, loss announced"
        else:
            verdict = "fail: exit %d" % code
    else:
        metrics = read_json(os.path.join(model, "metrics.json")) or {}
        loss = metrics.get("validation:objective_loss")
        line["validation_loss"] = loss
        # Servers restored from a checkpoint (without replication), from the scheduler's lines.
        log = read_text(os.path.join(run_dir, job + ".log"))
        line["restores"] = log.count("from checkpoint ckpt-")
        verdict = "ok" if code == 0 and loss is not None else "fail: exit %d" % code
        if code == 0 and loss is None:
            verdict = "fail: no validation loss"
    line["verdict"] = verdict
    print(json.dumps(line))


def svg_report(rows, path):
    """One band per run, a line per job from 0 to its wall time, its faults marked."""
    colors = {"kill": "#d62728", "stop": "#ff7f0e", "continue": "#2ca02c", "restart": "#1f77b4",
              "partition": "#9467bd", "heal": "#8c564b"}
    longest = max([r["wall_s"] for r in rows] + [1.0])
    left, width, band = 170, 760, 18
    height = 74 + band * len(rows)
    scale = width / longest
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="DejaVu Sans, sans-serif" font-size="11">' % (left + width + 30, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="16" font-size="13">Chaos runs: each job from launch to end '
           '(grey: ok, red: failed)</text>',
           '<text x="10" y="32">marks: kill (red), stop (orange), continue (green), '
           'restart (blue), partition (purple), heal (brown)</text>']
    for tick in range(0, int(longest) + 1, 10):
        x = left + tick * scale
        out.append('<line x1="%.1f" y1="40" x2="%.1f" y2="%d" stroke="#eee"/>' % (x, x, height - 20))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%d s</text>' % (x, height - 6, tick))
    for i, r in enumerate(rows):
        y = 50 + i * band
        ok = r["verdict"].startswith("ok")
        label = "seed %s %s" % (r["seed"], "exact_sum" if r["job"] == "exact_sum" else "train")
        out.append('<text x="10" y="%d">%s</text>' % (y + 4, html.escape(label)))
        out.append('<line x1="%d" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="6"/>' %
                   (left, y, left + r["wall_s"] * scale, y, "#bbb" if ok else "#d62728"))
        for event in r.get("events", []):
            color = colors.get(event.get("event"))
            if color is None or "t" not in event:
                continue
            x = left + event["t"] * scale
            title = html.escape("%s %s %s at %.1f s" % (event.get("event"), event.get("role", ""),
                                                        event.get("rank", ""), event["t"]))
            out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2">'
                       '<title>%s</title></line>' % (x, y - 7, x, y + 7, color, title))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def describe(r):
    if r["job"] == "exact_sum":
        text = "violations %s" % r.get("violations")
        if r.get("lost_ranges"):
            text += ", %d key(s) lost in range(s) %s, announced" % (
                r.get("announced_lost", 0), ", ".join(str(x) for x in r["lost_ranges"]))
            shares = r.get("missing_share") or {}
            if shares:
                text += " (%s of its updates missing)" % ", ".join(
                    "%.1f %%" % (100 * v) for v in shares.values())
        for rebuilt in r.get("rebuilt_from_copy") or []:
            text += ", range %s rebuilt from a removed server's copy (%s push(es) lost)" % (
                rebuilt.get("range"), rebuilt.get("pushes_lost_at_least"))
        pushes = r.get("pushes") or {}
        if pushes.get("repeated"):
            text += ", %d pushes made again" % pushes["repeated"]
        return text
    loss = r.get("validation_loss")
    text = "validation loss %s" % ("%.5f" % loss if isinstance(loss, (int, float)) else "-")
    if r.get("restores"):
        text += ", %d range restore(s) from a checkpoint" % r["restores"]
    return text


def report(out):
    rows = read_json_lines(os.path.join(out, "results.jsonl"))
    for r in rows:
        r["events"] = read_json_lines(os.path.join(out, "runs", "seed-%s" % r["seed"],
                                                   r["job"] + ".events.jsonl"))
    runs = sorted({r["seed"] for r in rows})
    failed = sorted({r["seed"] for r in rows if not r["verdict"].startswith("ok")})
    finished = sum(1 for r in rows if r["code"] == 0)
    violations = sum(r.get("violations") or 0 for r in rows if r["job"] == "exact_sum")
    announced = [r for r in rows if r["job"] == "exact_sum" and r.get("lost_ranges")]
    from_copy = sum(len(r.get("rebuilt_from_copy") or []) for r in rows)
    walls = sorted(r["wall_s"] for r in rows)
    lines = [
        "Runs: %d schedule(s), %d job(s); %d job(s) exited 0; exact_sum violations (silent "
        "loss or doubled): %d; exact_sum runs with announced loss: %d (%d keys); failed "
        "schedule(s): %s. Ranges rebuilt from a removed server's copy: %d." % (
            len(runs), len(rows), finished, violations, len(announced),
            sum(r.get("announced_lost") or 0 for r in announced),
            ", ".join(str(s) for s in failed) or "none", from_copy),
        "Job wall time: median %.1f s, longest %.1f s." % (
            walls[len(walls) // 2] if walls else 0, walls[-1] if walls else 0),
        "",
        "| seed | servers | replication | faults | job | outcome | wall s | fired / skipped / "
        "not fired | result | replay |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        c = r.get("faults", {})
        fired = sum(c.get(k, 0) for k in ("kill", "stop", "restart", "partition"))
        lines.append("| %s | %s | %s | `%s` | %s | %s | %.1f | %d / %d / %d | %s | `%s` |" % (
            r["seed"], r["servers"], r["replication"],
            (r["schedule"] or "(none)").replace("|", "\\|"), r["job"],
            r["verdict"], r["wall_s"], fired, c.get("skipped", 0), c.get("not_fired", 0),
            describe(r), r["replay"]))
    with open(os.path.join(out, "chaos.md"), "w") as f:
        f.write("\n".join(lines) + "\n\n![each job's faults on its time line](chaos.svg)\n")
    svg_report(rows, os.path.join(out, "chaos.svg"))
    print("\n".join(lines[:2]))


def main(argv):
    commands = {"schedule": (schedule, (3, 7)), "outcome": (outcome, (8, 8)),
                "report": (report, (1, 1))}
    if len(argv) < 2 or argv[1] not in commands:
        sys.exit(__doc__)
    function, (least, most) = commands[argv[1]]
    if not least <= len(argv) - 2 <= most:
        sys.exit(__doc__)
    function(*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
