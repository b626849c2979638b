#include "kv/rtt_estimator.h"

#include <algorithm>
#include <cmath>

namespace keel {
namespace {

// RFC 6298's gains and variance factor.
constexpr double kAlpha = 1.0 / 8;
constexpr double kBeta = 1.0 / 4;
constexpr double kVarianceFactor = 4;
// Doublings past this reach any max_s from any positive estimate.
constexpr int kMostDoublings = 60;

}  // namespace

RttEstimator::RttEstimator(double first_s, double min_s, double max_s)
    : first_s_(first_s), min_s_(min_s), max_s_(max_s) {}

void RttEstimator::OnAnswer(double round_trip_s, int sends) {
  if (sends != 1 || !(round_trip_s >= 0)) return;  // Karn's rule
  if (!has_sample_) {
    smoothed_s_ = round_trip_s;
    variance_s_ = round_trip_s / 2;
    has_sample_ = true;
  } else {
    variance_s_ = (1 - kBeta) * variance_s_ + kBeta * std::fabs(smoothed_s_ - round_trip_s);
    smoothed_s_ = (1 - kAlpha) * smoothed_s_ + kAlpha * round_trip_s;
  }
  backoff_sends_ = 1;
}

void RttEstimator::OnTimeout(int sends) {
  backoff_sends_ = std::max(backoff_sends_, std::min(sends, kMostDoublings) + 1);
}

double RttEstimator::Timeout(int sends) const {
  const double estimate =
      has_sample_ ? smoothed_s_ + std::max(kGranularitySeconds, kVarianceFactor * variance_s_)
                  : first_s_;
  const int doublings = std::clamp(std::max(sends, backoff_sends_) - 1, 0, kMostDoublings);
  return std::clamp(std::ldexp(estimate, doublings), min_s_, max_s_);
}

}  // namespace keel
