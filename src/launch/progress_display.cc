#include "launch/progress_display.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/error.h"

namespace keel {
namespace {

// Longer than this (about 31 years) a time left says nothing.
constexpr double kLongestDuration = 1e9;

// "epoch 3/15", or "epoch 3" while the job's epochs are not known.
std::string EpochOf(int epoch, int epochs) {
  return "epoch " + std::to_string(epoch) + (epochs > 0 ? "/" + std::to_string(epochs) : "");
}

std::string Percent(double fraction) {
  const double clamped = std::isfinite(fraction) ? std::clamp(fraction, 0.0, 1.0) : 0.0;
  return std::to_string(static_cast<int>(std::floor(clamped * 100))) + "%";
}

std::string Fixed(double value, int digits) {
  char buffer[64];
  snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
  return buffer;
}

// A rate, "?" until one is measured.
std::string RateText(double rate) { return rate > 0 ? FormatCompact(rate) : "?"; }

// "validation roc_auc_score 0.7712", or "" when `metrics` has no headline.
std::string HeadlineText(const MetricSet& metrics) {
  std::string name;
  double value = 0;
  if (!HeadlineMetric(metrics, &name, &value)) return "";
  return "validation " + name.substr(name.find(':') + 1) + " " + Fixed(value, 4);
}

// The training loss of a decided epoch, or "".
std::string LossText(const MetricSet& metrics) {
  auto loss = metrics.find("train:objective_loss");
  return loss == metrics.end() ? "" : "loss " + Fixed(loss->second, 4);
}

// `parts` joined by two spaces, empty ones left out.
std::string Join(std::initializer_list<std::string> parts, const char* separator = "  ") {
  std::string text;
  for (const std::string& part : parts) {
    if (part.empty()) continue;
    text += (text.empty() ? "" : separator) + part;
  }
  return text;
}

}  // namespace

ProgressMode ProgressModeFromFlag(const std::string& value, bool terminal) {
  if (value == "bar") return ProgressMode::kBar;
  if (value == "lines") return ProgressMode::kLines;
  if (value == "none") return ProgressMode::kNone;
  if (value == "auto") return terminal ? ProgressMode::kBar : ProgressMode::kLines;
  throw MakeError("--progress '", value, "' is not auto, bar, lines or none");
}

std::string FormatDuration(double seconds) {
  if (!(seconds >= 0 && seconds < kLongestDuration)) return "?";
  const long total = std::lround(seconds);
  const long hours = total / 3600, minutes = total / 60 % 60, rest = total % 60;
  char buffer[64];
  if (hours > 0) {
    snprintf(buffer, sizeof(buffer), "%ld:%02ld:%02ld", hours, minutes, rest);
  } else {
    snprintf(buffer, sizeof(buffer), "%ld:%02ld", minutes, rest);
  }
  return buffer;
}

std::string FormatCompact(double value) {
  if (!std::isfinite(value) || value < 0) return "?";
  const char* units[] = {"", "k", "M", "G", "T"};
  int unit = 0;
  while (value >= 999.5 && unit < 4) {
    value /= 1000;
    ++unit;
  }
  const int digits = unit == 0 || value >= 99.95 ? 0 : value >= 9.995 ? 1 : 2;
  return Fixed(value, digits) + units[unit];
}

std::string BarText(const ProgressRecord& progress,
                    const std::optional<ProgressRecord>& last_epoch) {
  const bool sized = progress.fraction >= 0;
  return Join({EpochOf(progress.epoch, progress.epochs),
               sized ? Percent(progress.fraction) : FormatCompact(progress.examples) + " ex",
               RateText(progress.rate) + " ex/s", "ETA " + FormatDuration(progress.eta),
               last_epoch ? HeadlineText(last_epoch->metrics) : ""});
}

std::string EpochText(const ProgressRecord& epoch, double seconds) {
  return Join({EpochOf(epoch.epoch, epoch.epochs), "100%",
               FormatCompact(static_cast<double>(epoch.examples)) + " ex", FormatDuration(seconds),
               HeadlineText(epoch.metrics), LossText(epoch.metrics),
               epoch.stop ? "no gain: stopping early" : ""});
}

std::string ProgressLineText(const ProgressRecord& progress) {
  const std::string share = progress.fraction >= 0
                                ? Percent(progress.fraction) + " (" +
                                      std::to_string(progress.examples) + " of " +
                                      std::to_string(progress.expected) + " examples)"
                                : std::to_string(progress.examples) + " examples";
  return Join({EpochOf(progress.epoch, progress.epochs) + ": " + share,
               RateText(progress.rate) + " examples/s", "ETA " + FormatDuration(progress.eta),
               "training loss " + Fixed(progress.loss, 4)},
              ", ");
}

ProgressDisplay::ProgressDisplay(ProgressMode mode, ConsoleWrite write, int width,
                                 double line_interval_s)
    : mode_(mode), write_(std::move(write)), width_(width), line_interval_s_(line_interval_s) {}

void ProgressDisplay::OnRecord(const ProgressRecord& record, double now) {
  switch (record.type) {
    case ProgressRecord::Type::kProgress:
      OnProgress(record, now);
      break;
    case ProgressRecord::Type::kEpoch:
      OnEpoch(record);
      break;
    case ProgressRecord::Type::kEnd:
      end_ = record;
      break;
  }
}

void ProgressDisplay::OnProgress(const ProgressRecord& record, double now) {
  // A late record of an epoch already decided says nothing new.
  if (last_epoch_ && record.epoch <= last_epoch_->epoch) return;
  if (mode_ == ProgressMode::kBar) {
    bar_ = BarText(record, last_epoch_);
    if (width_ > 1 && static_cast<int>(bar_.size()) >= width_) bar_.resize(width_ - 1);
    DrawBar();
  } else if (mode_ == ProgressMode::kLines && now - last_line_ >= line_interval_s_) {
    write_(ProgressLineText(record) + "\n", false);
    last_line_ = now;
  }
}

void ProgressDisplay::OnEpoch(const ProgressRecord& record) {
  if (last_epoch_ && record.epoch <= last_epoch_->epoch) return;
  const double seconds = record.seconds - previous_epoch_seconds_;
  previous_epoch_seconds_ = record.seconds;
  last_epoch_ = record;
  if (mode_ == ProgressMode::kNone) return;
  const std::string text = EpochText(record, seconds);
  write_(mode_ == ProgressMode::kBar ? "\r" + text + "\033[K\n" : text + "\n", false);
  bar_.clear();
}

void ProgressDisplay::PrintLine(const std::string& line, bool to_stderr) {
  if (!bar_.empty()) write_("\r\033[K", false);
  write_(line + "\n", to_stderr);
  if (!bar_.empty()) DrawBar();
}

void ProgressDisplay::EndBar() {
  if (bar_.empty()) return;
  write_("\n", false);
  bar_.clear();
}

void ProgressDisplay::DrawBar() { write_("\r" + bar_ + "\033[K", false); }

}  // namespace keel
