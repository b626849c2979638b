// The status page's HTML, style and script (see status_page.h). Plain
// HTML and JavaScript with no library: it fetches only /status.json from the
// scheduler that served it. Every value from the cluster goes into the page
// as text (textContent), never as markup.
#include "metrics/status_page.h"

namespace keel {

const char kStatusPageTemplate[] = R"KEEL_PAGE(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Keel job status</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d2433; background: #f6f7f9; }
  header { background: #1d2433; color: #fff; padding: 12px 24px; display: flex;
           align-items: baseline; justify-content: space-between; }
  header h1 { font-size: 18px; margin: 0; }
  #updated { font-size: 13px; color: #c9d1e0; }
  #updated.stale { color: #ffb4a8; }
  main { padding: 16px 24px; max-width: 1280px; }
  section { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: 12px 16px;
            margin-bottom: 16px; }
  h2 { font-size: 15px; margin: 0 0 8px; }
  .cards { display: flex; flex-wrap: wrap; gap: 12px; background: none; border: none; padding: 0; }
  .card { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: 8px 12px;
          flex: 1 1 0; min-width: 110px; }
  .card .label { font-size: 12px; color: #5b6475; }
  .card .value { font-size: 20px; font-weight: 600; }
  .bar { height: 14px; background: #e4e8ef; border-radius: 7px; overflow: hidden; }
  #bar-fill { height: 100%; width: 0; background: #2f7de1; transition: width 0.5s; }
  #progress-text { margin: 8px 0 0; }
  .charts { display: flex; flex-wrap: wrap; gap: 16px; }
  figure { margin: 0; flex: 1 1 400px; }
  figcaption { font-size: 13px; color: #5b6475; margin-bottom: 4px; }
  svg.chart { width: 100%; height: 180px; background: #fbfcfd; border: 1px solid #e4e8ef; }
  svg.chart text { font-size: 11px; fill: #5b6475; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #eef0f4;
           font-variant-numeric: tabular-nums; }
  th { font-size: 12px; color: #5b6475; font-weight: 600; }
  td.num { text-align: right; }
  .state-live { color: #1f7a3a; } .state-done { color: #2f5fb3; }
  .state-silent, .state-failed { color: #b3261e; font-weight: 600; }
  dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
  dt { color: #5b6475; } dd { margin: 0; }
  .empty { color: #8a93a3; font-style: italic; }
  .legend span { margin-right: 12px; font-size: 12px; }
</style>
</head>
<body>
<header><h1>Keel job status</h1><div id="updated">loading</div></header>
<main>
<section class="cards" id="cards"></section>
<section>
  <h2>Progress</h2>
  <div class="bar"><div id="bar-fill"></div></div>
  <p id="progress-text"></p>
</section>
<section class="charts">
  <figure><figcaption>Examples/s, job and per worker (since this page opened)</figcaption>
    <svg class="chart" id="rate-chart" viewBox="0 0 600 180" preserveAspectRatio="none"></svg>
    <div class="legend" id="rate-legend"></div></figure>
  <figure><figcaption id="metric-caption">Validation per epoch</figcaption>
    <svg class="chart" id="metric-chart" viewBox="0 0 600 180" preserveAspectRatio="none"></svg>
  </figure>
</section>
<section>
  <h2>Nodes</h2>
  <p class="paging" id="nodes-paging"></p>
  <table id="nodes"><thead><tr><th>Node</th><th>Role</th><th>Rank</th><th>Address</th>
    <th>State</th><th>Heartbeat</th><th>Epoch</th><th>Examples</th><th>Examples/s</th>
    <th>Loss</th></tr></thead><tbody></tbody></table>
</section>
<section>
  <h2>Key ranges</h2>
  <p class="paging" id="ranges-paging"></p>
  <table id="ranges"><thead><tr><th>Range</th><th>Begins at</th><th>Primary</th>
    <th>Backups (chain order)</th><th>Copying</th><th>Lost</th></tr></thead><tbody></tbody></table>
</section>
<section>
  <h2>Checkpoints</h2>
  <dl id="checkpoints"></dl>
</section>
<section>
  <h2>Membership events (latest first)</h2>
  <table id="events"><thead><tr><th>Time</th><th>Event</th><th>Node</th><th>Details</th>
    </tr></thead><tbody></tbody></table>
</section>
</main>
<script id="initial-status" type="application/json">{{STATUS_JSON}}</script>
<script>
"use strict";
const REFRESH_MS = 2000;
const HISTORY = 150;          // rate samples kept
const COLOURS = ["#2f7de1", "#e1742f", "#2fa35a", "#a33fb5", "#b5a23f", "#3fb5b0"];
const rateHistory = [];       // {time, job, workers: {rank: rate}}
let refreshes = 0;
let lastAnswer = null;        // Unix seconds of the last good answer
let failingSince = null;

function text(value) { return document.createTextNode(String(value)); }
function cell(content, cls) {
  const td = document.createElement("td");
  td.appendChild(text(content));
  if (cls) td.className = cls;
  return td;
}
function fixed(value, digits) {
  return value === null || value === undefined || !isFinite(value) ? "–" : value.toFixed(digits);
}
function count(value) {
  return value === null || value === undefined ? "–" : Math.round(value).toLocaleString("en-US");
}
function duration(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds) || seconds < 0) return "–";
  const s = Math.round(seconds), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  if (h > 0) return h + " h " + m + " min";
  if (m > 0) return m + " min " + (s % 60) + " s";
  if (seconds < 1) return Math.round(seconds * 1000) + " ms";
  return (seconds < 10 ? seconds.toFixed(1) : s) + " s";
}
function bytes(n) {
  if (!n) return "0 B";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; ++i; }
  return n.toFixed(i ? 1 : 0) + " " + units[i];
}
function clock(unix) {
  if (unix === null || unix === undefined) return "–";
  return new Date(unix * 1000).toLocaleTimeString("en-GB", { hour12: false });
}
function replaceRows(table, rows, columns, emptyText) {
  const body = document.querySelector("#" + table + " tbody");
  while (body.firstChild) body.removeChild(body.firstChild);
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    const td = cell(emptyText, "empty");
    td.colSpan = columns;
    tr.appendChild(td);
    body.appendChild(tr);
    return;
  }
  for (const row of rows) {
    const tr = document.createElement("tr");
    for (const c of row) tr.appendChild(Array.isArray(c) ? cell(c[0], c[1]) : cell(c));
    body.appendChild(tr);
  }
}

// The metric to plot and show: the one the terminal's progress shows
// (HeadlineMetric), else the training objective.
function chosenMetric(progress) {
  if (progress.headline_metric) return progress.headline_metric;
  return progress.decided.some(e => "train:objective_loss" in e.metrics) ? "train:objective_loss"
                                                                          : null;
}
// "validation:roc_auc_score" as "validation roc_auc_score".
function metricLabel(name) { return name.replace(":", " "); }

const SVG = "http://www.w3.org/2000/svg";
function svgElement(tag, attributes) {
  const e = document.createElementNS(SVG, tag);
  for (const name in attributes) e.setAttribute(name, attributes[name]);
  return e;
}
// Draws `series` ([{points: [[x, y], ...], colour}]) on `svg` (600 x 180),
// with the y range labelled; an empty chart says `emptyText`.
function drawChart(svg, series, emptyText) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const points = series.flatMap(s => s.points).filter(p => isFinite(p[0]) && isFinite(p[1]));
  if (points.length === 0) {
    const label = svgElement("text", { x: 300, y: 95, "text-anchor": "middle" });
    label.appendChild(text(emptyText));
    svg.appendChild(label);
    return;
  }
  const left = 56, right = 590, top = 10, bottom = 165;
  let x0 = Math.min(...points.map(p => p[0])), x1 = Math.max(...points.map(p => p[0]));
  let y0 = Math.min(...points.map(p => p[1])), y1 = Math.max(...points.map(p => p[1]));
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  if (y1 === y0) { const pad = Math.abs(y0) * 0.05 || 1; y0 -= pad; y1 += pad; }
  const sx = x => left + (x - x0) / (x1 - x0) * (right - left);
  const sy = y => bottom - (y - y0) / (y1 - y0) * (bottom - top);
  svg.appendChild(svgElement("line", { x1: left, y1: bottom, x2: right, y2: bottom,
                                       stroke: "#c5cbd6" }));
  svg.appendChild(svgElement("line", { x1: left, y1: top, x2: left, y2: bottom,
                                       stroke: "#c5cbd6" }));
  for (const [value, y] of [[y1, top + 4], [y0, bottom]]) {
    const label = svgElement("text", { x: left - 4, y: y, "text-anchor": "end" });
    label.appendChild(text(Math.abs(value) >= 100 ? Math.round(value).toLocaleString("en-US")
                                                   : value.toPrecision(4)));
    svg.appendChild(label);
  }
  for (const s of series) {
    const finite = s.points.filter(p => isFinite(p[0]) && isFinite(p[1]));
    if (finite.length === 0) continue;
    svg.appendChild(svgElement("polyline", {
      points: finite.map(p => sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1)).join(" "),
      fill: "none", stroke: s.colour, "stroke-width": 2 }));
    for (const p of finite.length <= 40 ? finite : []) {
      svg.appendChild(svgElement("circle", { cx: sx(p[0]).toFixed(1), cy: sy(p[1]).toFixed(1),
                                             r: 3, fill: s.colour }));
    }
  }
}

function renderCards(status) {
  const view = status.view, progress = status.progress;
  const servers = view.members.servers, workers = view.members.workers;
  const last = progress.decided.length ? progress.decided[progress.decided.length - 1] : null;
  const metric = chosenMetric(progress);
  const cards = [
    ["View epoch", view.epoch || "waiting"],
    ["Servers", servers + " / " + view.expected_servers],
    ["Workers", workers + " / " + view.expected_workers],
    ["Epoch", progress.epochs ? progress.epoch + " / " + progress.epochs : "–"],
    ["Examples/s", count(progress.examples_per_second)],
    ["Time left", progress.end ? "done" : duration(progress.eta_seconds)],
    ["Training loss", fixed(progress.training_loss, 4)],
    [metric ? metricLabel(metric) : "Validation", last && metric ? fixed(last.metrics[metric], 4)
                                                                 : "–"],
  ];
  const box = document.getElementById("cards");
  while (box.firstChild) box.removeChild(box.firstChild);
  for (const [label, value] of cards) {
    const card = document.createElement("div");
    card.className = "card";
    const l = document.createElement("div"); l.className = "label"; l.appendChild(text(label));
    const v = document.createElement("div"); v.className = "value"; v.appendChild(text(value));
    card.appendChild(l); card.appendChild(v);
    box.appendChild(card);
  }
}

function renderProgress(status) {
  const progress = status.progress;
  let fraction = 0;
  if (progress.end) {
    fraction = 1;
  } else if (progress.epochs > 0 && progress.epoch > 0) {
    const within = progress.epoch_fraction === null ? 0 : Math.max(0, progress.epoch_fraction);
    fraction = Math.min(1, (progress.epoch - 1 + within) / progress.epochs);
  }
  document.getElementById("bar-fill").style.width = (fraction * 100).toFixed(1) + "%";
  let line;
  if (progress.end) {
    const end = progress.end;
    line = "Job finished after " + end.epochs_run + " epoch" + (end.epochs_run === 1 ? "" : "s") +
           (end.stopped_early ? " (stopped early)" : "") +
           (end.model_dir ? "; model in " + end.model_dir : "") + ".";
  } else if (!progress.epochs) {
    line = status.view.epoch ? "Waiting for the workers' first reports."
                             : "Waiting for every node to register.";
  } else {
    line = "Epoch " + progress.epoch + " of " + progress.epochs + ": " +
           (progress.epoch_fraction === null ? "–" : (progress.epoch_fraction * 100).toFixed(0)) +
           "% read (" + count(progress.epoch_done) + " of " +
           (progress.epoch_expected ? count(progress.epoch_expected) : "?") + " examples); " +
           (fraction * 100).toFixed(1) + "% of the job, " + duration(progress.eta_seconds) +
           " left; " + count(progress.examples_read) + " examples read in " +
           duration(progress.seconds) + ".";
  }
  document.getElementById("progress-text").textContent = line;
}

function renderCharts(status) {
  const progress = status.progress;
  const ranks = Array.from(new Set(rateHistory.flatMap(s => Object.keys(s.workers))))
                     .map(Number).sort((a, b) => a - b);
  const start = rateHistory.length ? rateHistory[0].time : 0;
  const series = [{ points: rateHistory.map(s => [s.time - start, s.job]), colour: "#1d2433" }];
  ranks.forEach((rank, i) => series.push({
    points: rateHistory.filter(s => rank in s.workers).map(s => [s.time - start, s.workers[rank]]),
    colour: COLOURS[i % COLOURS.length] }));
  drawChart(document.getElementById("rate-chart"), series, "no examples read yet");
  const legend = document.getElementById("rate-legend");
  while (legend.firstChild) legend.removeChild(legend.firstChild);
  [["job", "#1d2433"]].concat(ranks.map((r, i) => ["worker " + r, COLOURS[i % COLOURS.length]]))
      .forEach(([name, colour]) => {
        const span = document.createElement("span");
        span.style.color = colour;
        span.appendChild(text("\u25A0 " + name));
        legend.appendChild(span);
      });
  const metric = chosenMetric(progress);
  document.getElementById("metric-caption").textContent =
      (metric ? metricLabel(metric) : "Validation") + " per epoch";
  const points = metric ? progress.decided.filter(e => e.metrics[metric] !== null &&
                                                       e.metrics[metric] !== undefined)
                                          .map(e => [e.epoch, e.metrics[metric]]) : [];
  drawChart(document.getElementById("metric-chart"), [{ points: points, colour: "#2f7de1" }],
            "no epoch decided yet");
}

function nodeState(node) {
  if (node.done) return node.error ? ["failed: " + node.error, "state-failed"]
                                   : ["done", "state-done"];
  if (node.silent) return ["silent", "state-silent"];
  return ["live", "state-live"];
}

function renderNodes(status) {
  const byRank = {};
  for (const w of status.progress.workers) byRank[w.rank] = w;
  const nodes = status.view.nodes;  // servers first, by rank
  renderPaging("nodes", status.view.nodes_from, nodes.length, status.view.nodes_total);
  replaceRows("nodes", nodes.map(node => {
    const w = node.role === "worker" ? byRank[node.rank] : null;
    return [node.id, node.role, node.rank, node.address, nodeState(node),
            duration(node.heartbeat_age_s) + " ago",
            [w && w.epoch ? w.epoch : "–", "num"], [w ? count(w.examples) : "–", "num"],
            [w ? count(w.examples_per_second) : "–", "num"], [w ? fixed(w.loss, 4) : "–", "num"]];
  }), 10, "no node has registered yet");
}

// A table's rows shown, of how many, and links to the pages before and after
// (the page's own query with `table`_from changed: /status.json takes it too).
function renderPaging(table, from, shown, total) {
  const box = document.getElementById(table + "-paging");
  while (box.firstChild) box.removeChild(box.firstChild);
  if (shown === total) return;
  box.appendChild(document.createTextNode(
      "rows " + (shown ? from + 1 : from) + "\u2013" + (from + shown) + " of " + total + " "));
  const link = (text, start) => {
    const query = new URLSearchParams(location.search);
    query.set(table + "_from", start);
    const a = document.createElement("a");
    a.href = "?" + query.toString();
    a.textContent = text;
    box.appendChild(a);
    box.appendChild(document.createTextNode(" "));
  };
  const page = Math.max(shown, 1);
  if (from > 0) link("previous", Math.max(0, from - page));
  if (from + shown < total) link("next", from + shown);
}

function renderRanges(status) {
  renderPaging("ranges", status.view.ranges_from, status.view.ranges.length,
               status.view.ranges_total);
  replaceRows("ranges", status.view.ranges.map((range, i) => [
    status.view.ranges_from + i, range.begin, "server " + range.primary,
    range.backups.length ? range.backups.map(r => "server " + r).join(" \u2192 ") : "none",
    range.copying.length ? range.copying.map(r => "server " + r).join(", ") : "–",
    range.lost ? "every replica left" + (range.lost.since ? " at " + clock(range.lost.since) : "") +
      " (last on server " + (range.lost.last_server === null ? "unknown" : range.lost.last_server) +
      "); rebuilt from " +
      (range.lost.rebuilt_from || "nothing yet") : "–"]),
    6, "no view yet: the ranges are assigned once every node has registered");
}

function renderCheckpoints(status) {
  const c = status.checkpoints;
  const items = c.uri ? [
    ["Stored in", c.uri],
    ["Last committed", c.last || "none yet"],
    ["Committed / abandoned", c.committed + " / " + c.abandoned],
    ["Last took", c.last_age_s === null ? "–" : duration(c.last_seconds) + ", " + bytes(c.last_bytes)],
    ["Last committed at", c.last_age_s === null ? "–" : duration(c.last_age_s) + " ago"],
  ] : [["Checkpoints", "off (no --checkpoint_uri)"]];
  const list = document.getElementById("checkpoints");
  while (list.firstChild) list.removeChild(list.firstChild);
  for (const [name, value] of items) {
    const dt = document.createElement("dt"); dt.appendChild(text(name));
    const dd = document.createElement("dd"); dd.appendChild(text(value));
    list.appendChild(dt); list.appendChild(dd);
  }
}

function eventDetails(event) {
  if (event.event === "view") {
    return "epoch " + event.epoch + ": " + event.servers + " servers, " + event.workers +
           " workers; chains " + JSON.stringify(event.ranges);
  }
  const skip = new Set(["time", "event", "role", "rank", "node"]);
  return Object.keys(event).filter(k => !skip.has(k))
               .map(k => k + " " + (typeof event[k] === "string" ? event[k]
                                                                : JSON.stringify(event[k])))
               .join("; ");
}

function renderEvents(status) {
  const events = status.events.slice(-20).reverse();
  replaceRows("events", events.map(e => [
    clock(e.time), e.event, e.event === "view" ? "–" : e.role + " " + e.rank + " (node " + e.node + ")",
    eventDetails(e)]), 4, "no membership events yet");
}

function render(status) {
  const sample = { time: status.time, job: status.progress.examples_per_second, workers: {} };
  for (const w of status.progress.workers) {
    if (w.epoch > 0) sample.workers[w.rank] = w.examples_per_second;
  }
  rateHistory.push(sample);
  if (rateHistory.length > HISTORY) rateHistory.shift();
  renderCards(status);
  renderProgress(status);
  renderCharts(status);
  renderNodes(status);
  renderRanges(status);
  renderCheckpoints(status);
  renderEvents(status);
}

function showUpdated() {
  const updated = document.getElementById("updated");
  if (failingSince !== null) {
    updated.className = "stale";
    updated.textContent = "the scheduler has not answered since " + clock(failingSince) +
                          " (the job may have ended); showing its state at " + clock(lastAnswer);
  } else {
    updated.className = "";
    updated.textContent = "updated " + clock(lastAnswer) + " \u00b7 refresh " + refreshes +
                          " \u00b7 every " + REFRESH_MS / 1000 + " s";
  }
}

function refresh() {
  fetch("status.json" + location.search, { cache: "no-store" })
      .then(answer => {
        if (!answer.ok) throw new Error("HTTP " + answer.status);
        return answer.json();
      })
      .then(status => {
        ++refreshes;
        lastAnswer = status.time;
        failingSince = null;
        render(status);
        showUpdated();
      })
      .catch(() => {
        if (failingSince === null) failingSince = Date.now() / 1000;
        showUpdated();
      })
      .finally(() => setTimeout(refresh, REFRESH_MS));
}

const initial = JSON.parse(document.getElementById("initial-status").textContent);
lastAnswer = initial.time;
render(initial);
showUpdated();
setTimeout(refresh, REFRESH_MS);
</script>
</body>
</html>
)KEEL_PAGE";

}  // namespace keel
