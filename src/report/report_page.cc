#include "report/report_page.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "base/xml.h"
#include "report/svg_chart.h"

namespace keel {
namespace {

using Points = std::vector<std::pair<double, double>>;

// The validation metric plotted per epoch: the first of these the job has.
const char* const kPreferredMetrics[] = {"roc_auc_score", "binary_classification_accuracy",
                                         "multiclass_accuracy", "rmse", "absolute_loss"};

// The final metrics shown in the header, in this order, when present.
const char* const kHeaderMetrics[] = {"validation:objective_loss",
                                      "validation:roc_auc_score",
                                      "validation:binary_classification_accuracy",
                                      "validation:multiclass_accuracy",
                                      "validation:rmse",
                                      "test:objective_loss",
                                      "test:roc_auc_score",
                                      "test:binary_classification_accuracy",
                                      "test:multiclass_accuracy",
                                      "test:rmse",
                                      "train:objective_loss",
                                      "train:best_epoch",
                                      "train:selected_model",
                                      "train:epochs",
                                      "train:examples_per_second",
                                      "train:gate_wait_share",
                                      "train:max_staleness"};

const char kStyle[] =
    "body{font-family:sans-serif;margin:24px;color:#222;background:#fafafa;max-width:1300px}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px "
    "solid #ddd;padding-bottom:4px}p.meta{color:#666;margin:0 0 12px}"
    "p.note{color:#666;font-style:italic;margin:6px 0}"
    ".plots{display:flex;flex-wrap:wrap;gap:12px}svg.chart{border:1px solid #ddd;background:#fff}"
    "table{border-collapse:collapse;font-size:13px;margin:4px 0}td,th{border:1px solid #ddd;"
    "padding:3px 8px;text-align:left}th{background:#f0f0f0}td.n{text-align:right;"
    "font-variant-numeric:tabular-nums}.columns{columns:3;column-gap:24px}"
    ".columns table{width:100%}";

std::string Escape(const std::string& text) { return XmlEscape(text); }

std::string Format(double value) {
  char text[32];
  snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

std::string Note(const std::string& text) { return "<p class=\"note\">" + Escape(text) + "</p>"; }

// A chart tall enough for its legend's `entries`.
ChartSize SizeFor(size_t entries) {
  ChartSize size;
  size.height = std::max(300, 70 + 17 * static_cast<int>(entries));
  return size;
}

// The number of models the history carries ("model_<k>:" figures, k of at
// most 4 digits; 1 without).
int ModelCount(const std::vector<HistoryEpoch>& history) {
  int models = 1;
  for (const HistoryEpoch& epoch : history) {
    for (const auto& [name, value] : epoch.figures) {
      if (name.rfind("model_", 0) != 0) continue;
      const size_t colon = name.find(':');
      const std::string digits = name.substr(6, colon == std::string::npos ? 0 : colon - 6);
      if (digits.empty() || digits.size() > 4 ||
          digits.find_first_not_of("0123456789") != std::string::npos) {
        continue;
      }
      models = std::max(models, std::stoi(digits) + 1);
    }
  }
  return models;
}

Points EpochSeries(const std::vector<HistoryEpoch>& history, const std::string& name) {
  Points points;
  for (const HistoryEpoch& epoch : history) {
    if (auto it = epoch.figures.find(name); it != epoch.figures.end()) {
      points.emplace_back(epoch.epoch, it->second);
    }
  }
  return points;
}

// The figure's name for model k of `models` ("model_2:validation:auc", or
// unprefixed for a single model).
std::string OfModel(int k, int models, const std::string& name) {
  return models > 1 ? "model_" + std::to_string(k) + ":" + name : name;
}

std::string ModelName(int k, int models, const std::string& what) {
  return models > 1 ? "model " + std::to_string(k) + " " + what : what;
}

std::string ValidationMetric(const std::vector<HistoryEpoch>& history) {
  std::set<std::string> present;
  for (const HistoryEpoch& epoch : history) {
    for (const auto& [name, value] : epoch.figures) {
      if (name.rfind("validation:", 0) == 0) present.insert(name.substr(11));
    }
  }
  for (const char* metric : kPreferredMetrics) {
    if (present.count(metric)) return metric;
  }
  return "";
}

std::string Header(const JobRecord& record, const std::string& generated) {
  std::string html = "<h1>Keel job report</h1><p class=\"meta\">" + Escape(record.model_dir) +
                     " &middot; generated " + Escape(generated) + "</p>";
  if (!record.job.empty()) {
    html += "<table class=\"job\"><tr>";
    for (const auto& [name, value] : record.job) html += "<th>" + Escape(name) + "</th>";
    html += "</tr><tr>";
    for (const auto& [name, value] : record.job) html += "<td>" + Escape(value) + "</td>";
    html += "</tr></table>";
  } else {
    html += Note("No model.json: the job has not written its model (yet).");
  }
  return html;
}

std::string BestModel(const JobRecord& record) {
  std::string html = "<h2>The selected model's metrics</h2>";
  std::string rows;
  for (const char* name : kHeaderMetrics) {
    if (auto it = record.final_metrics.find(name); it != record.final_metrics.end()) {
      rows +=
          "<tr><th>" + Escape(name) + "</th><td class=\"n\">" + Format(it->second) + "</td></tr>";
    }
  }
  if (rows.empty()) return html + Note("No metrics.json: the job has not finished (yet).");
  return html + "<table class=\"metrics\">" + rows + "</table>";
}

std::string Hyperparameters(const JobRecord& record) {
  std::string html = "<h2>Hyperparameters</h2>";
  if (record.hyperparameters.empty()) return html + Note("No hyperparameters recorded.");
  html += "<div class=\"columns\"><table>";
  for (const auto& [name, value] : record.hyperparameters) {
    html += "<tr><th>" + Escape(name) + "</th><td>" + Escape(value) + "</td></tr>";
  }
  return html + "</table></div>";
}

std::string EpochPlots(const JobRecord& record) {
  std::string html = "<h2>Per epoch</h2>";
  const auto& history = record.history;
  if (history.empty()) return html + Note("No history.jsonl: no epoch has finished.");
  const int models = ModelCount(history);
  LineChart loss("Loss per epoch", "epoch", "objective loss");
  loss.set_dots(true);
  loss.set_integer_x(true);
  size_t entries = 0;
  for (int k = 0; k < models; ++k) {
    for (const char* channel : {"train", "validation"}) {
      Points points =
          EpochSeries(history, OfModel(k, models, std::string(channel) + ":objective_loss"));
      if (points.empty()) continue;
      loss.AddSeries(ModelName(k, models, channel), std::move(points));
      ++entries;
    }
  }
  html += "<div class=\"plots\">" + loss.Svg(SizeFor(entries));
  const std::string metric = ValidationMetric(history);
  if (metric.empty()) {
    html += "</div>" + Note(
                           "No validation channel: no validation metric per epoch (the loss "
                           "plot shows training loss only).");
    return html;
  }
  LineChart chart("Validation " + metric + " per epoch", "epoch", metric);
  chart.set_dots(true);
  chart.set_integer_x(true);
  for (int k = 0; k < models; ++k) {
    chart.AddSeries(ModelName(k, models, "validation"),
                    EpochSeries(history, OfModel(k, models, "validation:" + metric)));
  }
  return html + chart.Svg(SizeFor(static_cast<size_t>(models))) + "</div>";
}

// Membership changes and faults as markers, checkpoints as bands, on a time
// axis in seconds since the job started.
void MarkEvents(const JobRecord& record, LineChart* chart) {
  for (const JobEvent& event : record.events) {
    chart->AddMarker(event.time - record.start_time, event.event,
                     event.event + " " + event.who + (event.detail.empty() ? "" : ": ") +
                         event.detail + " at " + Format(event.time - record.start_time) + " s");
  }
  for (const CheckpointRecord& checkpoint : record.checkpoints) {
    const double begin = checkpoint.started - record.start_time;
    chart->AddSpan(begin, begin + checkpoint.seconds, "checkpoint",
                   "checkpoint " + checkpoint.id + ": " + Format(checkpoint.seconds) + " s");
  }
}

std::string TimePlots(const JobRecord& record) {
  std::string html = "<h2>Over time</h2>";
  if (record.workers.empty()) {
    return html + Note(
                      "No worker timeline (timeline/worker-*.jsonl): the job ran without "
                      "--model_dir, or with a Keel that did not record one.");
  }
  LineChart rate("Examples/s per worker", "seconds since the job started", "examples/s");
  LineChart loss("Training loss per worker", "seconds since the job started",
                 "mean loss of the epoch so far");
  for (LineChart* chart : {&rate, &loss}) chart->set_x_from_zero(true);
  for (const auto& [rank, worker] : record.workers) {
    Points rates, losses;
    for (const WorkerSample& sample : worker.samples) {
      rates.emplace_back(sample.time - record.start_time, sample.examples_per_second);
      losses.emplace_back(sample.time - record.start_time, sample.loss);
    }
    rate.AddSeries("worker " + std::to_string(rank), std::move(rates));
    loss.AddSeries("worker " + std::to_string(rank), std::move(losses));
  }
  MarkEvents(record, &rate);
  MarkEvents(record, &loss);
  std::set<std::string> kinds;
  for (const JobEvent& event : record.events) kinds.insert(event.event);
  const ChartSize size = SizeFor(record.workers.size() + kinds.size() + 1);
  html += "<div class=\"plots\">" + rate.Svg(size) + loss.Svg(size) + "</div>";
  if (record.workers.size() == 1) html += Note("One worker: nothing to compare it with.");
  return html;
}

std::string StalenessPlots(const JobRecord& record) {
  std::string html = "<h2>Staleness gate</h2>";
  std::vector<std::pair<std::string, uint64_t>> buckets;
  uint64_t pulls = 0;
  LineChart waits("Gate waits per epoch", "epoch", "seconds blocked on pulls");
  waits.set_dots(true);
  waits.set_integer_x(true);
  for (const auto& [rank, worker] : record.workers) {
    Points points;
    for (const WorkerEpoch& epoch : worker.epochs) {
      points.emplace_back(epoch.epoch, epoch.pull_wait_seconds);
      for (size_t b = 0; b < epoch.staleness.size(); ++b) {
        if (buckets.size() <= b) buckets.emplace_back(epoch.staleness[b].first, 0);
        buckets[b].second += epoch.staleness[b].second;
        pulls += epoch.staleness[b].second;
      }
    }
    waits.AddSeries("worker " + std::to_string(rank), std::move(points));
  }
  if (waits.points() == 0) return html + Note("No worker epoch lines: no gate figures.");
  std::string plots = "<div class=\"plots\">";
  if (pulls > 0) {
    BarChart histogram("Observed staleness (pulls, all workers)", "staleness (clocks)", "pulls");
    for (const auto& [bucket, count] : buckets)
      histogram.AddBar(bucket, static_cast<double>(count));
    plots += histogram.Svg();
  }
  plots += waits.Svg(SizeFor(record.workers.size())) + "</div>";
  if (pulls == 0) plots += Note("No pull observed any staleness figure (no gated pulls).");
  return html + plots;
}

std::string Events(const JobRecord& record) {
  std::string html = "<h2>Membership and faults</h2>";
  for (const std::string& fault : record.transport_faults) html += Note("Injected: " + fault);
  if (record.events.empty()) return html + Note("No membership changes or faults were recorded.");
  html +=
      "<table class=\"events\"><tr><th>seconds</th><th>event</th><th>who</th><th>detail</th>"
      "</tr>";
  for (const JobEvent& event : record.events) {
    html += "<tr><td class=\"n\">" + Format(event.time - record.start_time) + "</td><td>" +
            Escape(event.event) + "</td><td>" + Escape(event.who) + "</td><td>" +
            Escape(event.detail) + "</td></tr>";
  }
  return html + "</table>";
}

std::string Checkpoints(const JobRecord& record) {
  std::string html = "<h2>Checkpoints</h2>";
  if (record.checkpoints.empty()) return html + Note("No checkpoints (no --checkpoint_uri).");
  BarChart chart("Checkpoint times", "checkpoint (in order: the table names them)",
                 "seconds from copy to commit");
  std::string rows;
  for (const CheckpointRecord& checkpoint : record.checkpoints) {
    chart.AddBar(std::to_string(chart.bars() + 1), checkpoint.seconds);
    rows += "<tr><td>" + std::to_string(chart.bars()) + "</td><td>" + Escape(checkpoint.id) +
            "</td><td class=\"n\">" + Format(checkpoint.started - record.start_time) +
            "</td><td class=\"n\">" + Format(checkpoint.seconds) + "</td><td class=\"n\">" +
            std::to_string(checkpoint.bytes) + "</td><td>" +
            Escape(checkpoint.error.empty() ? "committed" : checkpoint.error) + "</td></tr>";
  }
  return html + "<div class=\"plots\">" + chart.Svg() +
         "</div><table class=\"checkpoints\"><tr><th></th><th>checkpoint</th><th>started (s)</th>"
         "<th>seconds</th><th>bytes</th><th>outcome</th></tr>" +
         rows + "</table>";
}

// One plot per health figure (weight_norm, gradient_norm, ...), a line per table.
std::string HealthPlots(const JobRecord& record) {
  std::map<std::string, std::map<std::string, Points>> figures;  // figure -> table -> points
  for (const HistoryEpoch& epoch : record.history) {
    for (const auto& [table, values] : epoch.health) {
      for (const auto& [figure, value] : values) {
        figures[figure][table].emplace_back(epoch.epoch, value);
      }
    }
  }
  if (figures.empty()) return "";
  std::string html = "<h2>Training health</h2><div class=\"plots\">";
  for (auto& [figure, tables] : figures) {
    LineChart chart(figure + " per epoch", "epoch", figure);
    chart.set_dots(true);
    chart.set_integer_x(true);
    for (auto& [table, points] : tables) chart.AddSeries(table, std::move(points));
    html += chart.Svg(SizeFor(tables.size()));
  }
  return html + "</div>";
}

}  // namespace

std::string ReportHtml(const JobRecord& record, const std::string& generated) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Keel job "
         "report: " +
         Escape(record.model_dir) + "</title><style>" + kStyle + "</style></head><body>\n" +
         Header(record, generated) + BestModel(record) + EpochPlots(record) + TimePlots(record) +
         StalenessPlots(record) + Events(record) + Checkpoints(record) + HealthPlots(record) +
         Hyperparameters(record) + "\n</body></html>\n";
}

}  // namespace keel
