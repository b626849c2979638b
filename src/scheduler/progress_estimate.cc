#include "scheduler/progress_estimate.h"

#include <algorithm>
#include <cmath>

namespace keel {

RateMeter::RateMeter(double window_s, double time_constant_s)
    : window_s_(window_s), time_constant_s_(time_constant_s) {}

void RateMeter::Add(uint64_t examples, double since, double now) {
  if (window_begin_ < 0) window_begin_ = std::min(since, now);
  window_examples_ += examples;
  const double length = now - window_begin_;
  if (length < window_s_) return;
  const double sample = static_cast<double>(window_examples_) / length;
  const double weight = measured_ ? 1.0 - std::exp(-length / time_constant_s_) : 1.0;
  rate_ += weight * (sample - rate_);
  measured_ = true;
  window_begin_ = now;
  window_examples_ = 0;
}

void RateMeter::Pause() {
  window_begin_ = -1;
  window_examples_ = 0;
}

ProgressFigures EstimateProgress(const ProgressCounts& counts) {
  ProgressFigures figures;
  if (counts.epoch_expected == 0) return figures;
  const double expected = static_cast<double>(counts.epoch_expected);
  figures.epoch_fraction = std::min(1.0, static_cast<double>(counts.epoch_done) / expected);
  const int epochs_after = counts.stopping ? 0 : std::max(0, counts.epochs - counts.epoch);
  const double left =
      expected * (1.0 - figures.epoch_fraction) + expected * static_cast<double>(epochs_after);
  if (counts.seconds_per_example > 0) {
    figures.eta_seconds = left * counts.seconds_per_example;
  } else if (counts.rate > 0) {
    figures.eta_seconds = left / counts.rate;
  }
  return figures;
}

}  // namespace keel
