#include "launch/job_summary.h"

#include <cstdio>

#include "base/exit_status.h"
#include "launch/progress_display.h"
#include "scheduler/range_chains.h"

namespace keel {
namespace {

// How the job ended, in a few words.
std::string Ending(int exit_code) {
  switch (exit_code) {
    case 0:
      return "job done";
    case 124:
      return "job timed out (--timeout)";
    case 130:
      return "job interrupted";
    case kPreemptedExitStatus:
      return "job preempted (the same command with --resume=latest goes on)";
    case kDataLostExitStatus:
      return "job lost data (--allow_data_loss lets such a job end with 0)";
    default:
      return "job failed";
  }
}

// "a name value, name value" for the metrics of `channel`, "" if none.
std::string ChannelMetrics(const MetricSet& metrics, const std::string& channel) {
  std::string text;
  const std::string prefix = channel + ":";
  for (const auto& [name, value] : metrics) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    char number[32];
    snprintf(number, sizeof(number), "%.4f", value);
    text += (text.empty() ? "" : ", ") + name.substr(prefix.size()) + " " + number;
  }
  return text;
}

// The first line: the ending, the time, and what was read.
std::string Headline(const JobSummaryInput& input) {
  std::string line = Ending(input.exit_code) + " in " + FormatDuration(input.wall_seconds) +
                     " (exit status " + std::to_string(input.exit_code) + ")";
  // A job without epochs (kv_bench) reports none.
  if (!input.end || (input.end->epochs == 0 && !input.end->reported)) return line + "\n";
  const ProgressRecord& end = *input.end;
  line += ": " + std::to_string(end.epochs_run) +
          (end.epochs > 0 ? " of " + std::to_string(end.epochs) : "") + " epochs, " +
          FormatCompact(static_cast<double>(end.examples)) + " examples";
  // Over the job's time to its last epoch, and in the minibatch passes alone
  // (metrics.json's train:examples_per_second).
  if (end.seconds > 0) {
    line += ", " + FormatCompact(static_cast<double>(end.examples) / end.seconds) + " examples/s";
  }
  auto training_rate = end.metrics.find("train:examples_per_second");
  if (training_rate != end.metrics.end()) {
    line += " (" + FormatCompact(training_rate->second) + "/s while training)";
  }
  if (end.failed_workers > 0) {
    line += "; " + std::to_string(end.failed_workers) + " worker(s) failed (see the errors above)";
  }
  return line + "\n";
}

// A line of the summary: "  name         value".
std::string Entry(const std::string& name, const std::string& value) {
  std::string padded = "  " + name;
  padded.resize(15, ' ');
  return padded + value + "\n";
}

// The metrics named "PREFIX..." without the prefix.
MetricSet WithPrefix(const MetricSet& metrics, const std::string& prefix) {
  MetricSet named;
  for (const auto& [name, value] : metrics) {
    if (name.compare(0, prefix.size(), prefix) == 0) named[name.substr(prefix.size())] = value;
  }
  return named;
}

// A line for each channel where the kept model is worse than a constant
// prediction of the training labels (the trivial:CHANNEL:* figures the
// worker recorded).
std::string TrivialWarnings(const MetricSet& metrics) {
  std::string text;
  for (const std::string channel : {"validation", "test"}) {
    MetricSet trivial = WithPrefix(metrics, "trivial:" + channel + ":");
    trivial.erase("worse");
    const std::vector<std::string> worse =
        WorseThanTrivial(WithPrefix(metrics, channel + ":"), trivial);
    if (worse.empty()) continue;
    std::string figures;
    for (const std::string& figure : worse) figures += (figures.empty() ? "" : ", ") + figure;
    const auto selected = metrics.find("train:selected_model");
    const std::string which = selected == metrics.end()
                                  ? "the model"
                                  : "the kept model (model " +
                                        std::to_string(static_cast<int>(selected->second)) + ")";
    text += Entry("WARNING", which + " is worse on " + channel +
                                 " than a constant prediction of the training labels: " + figures);
  }
  return text;
}

std::string Absolute(const std::string& path, const std::string& folder) {
  if (path.empty() || path[0] == '/' || path.find("://") != std::string::npos || folder.empty()) {
    return path;
  }
  return folder + "/" + path;
}

std::string Outputs(const JobSummaryInput& input) {
  std::string text;
  const ProgressRecord& end = *input.end;
  if (!end.model_dir.empty()) {
    const std::string model = Absolute(end.model_dir, input.working_folder);
    text += Entry("model", model);
    text += Entry("metrics", model + "/metrics.json, " + model + "/history.jsonl");
  } else if (end.reported) {
    text += Entry("model", "not written (no --model_dir)");
  }
  if (!end.checkpoint_uri.empty()) text += Entry("checkpoints", end.checkpoint_uri);
  return text;
}

}  // namespace

std::string FormatJobSummary(const JobSummaryInput& input) {
  std::string text = Headline(input);
  if (input.end) {
    const ProgressRecord& end = *input.end;
    if (end.stop) {
      text += Entry("stopped", "early, after epoch " + std::to_string(end.epochs_run) + " of " +
                                   std::to_string(end.epochs) + ": no gain on validation");
    }
    auto best = end.metrics.find("train:best_epoch");
    const std::string validation = ChannelMetrics(end.metrics, "validation");
    if (!validation.empty()) {
      const std::string which = best == end.metrics.end()
                                    ? ""
                                    : "(epoch " + std::to_string(static_cast<int>(best->second)) +
                                          ", kept for its lowest loss) ";
      text += Entry("validation", which + validation);
    }
    const std::string test = ChannelMetrics(end.metrics, "test");
    if (!test.empty()) text += Entry("test", test);
    text += TrivialWarnings(end.metrics);
    if (!end.lost_ranges.empty()) {
      text += Entry("data lost", "key range(s) " + JoinRanges(end.lost_ranges) +
                                     " lost every replica during the job: the updates their "
                                     "last server acknowledged that no surviving copy or "
                                     "checkpoint held are gone (the membership log says which "
                                     "and how many)");
    }
    text += Outputs(input);
  }
  text += Entry("logs", input.log_dir.empty() ? "not kept (--log_dir=DIR keeps every role's output)"
                                              : input.log_dir + " (a file per role)");
  return text;
}

}  // namespace keel
