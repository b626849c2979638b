#include "worker/health_rules.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "base/error.h"

namespace keel {
namespace {

constexpr const char* kHowToGoOn = " (--health_rules=off lets the job go on)";

std::string Where(int epoch, int table) {
  return std::string("training health: epoch ") + std::to_string(epoch) + ", table " +
         HealthTableName(table) + ": ";
}

}  // namespace

bool NonFiniteLoss(double mean_loss) {
  return !std::isfinite(mean_loss) || mean_loss >= std::numeric_limits<float>::max();
}

void HealthRules::CheckMinibatch(int epoch, const std::vector<double>& mean_losses,
                                 const MinibatchGradients& gradients) {
  if (!options_.on) return;
  CheckLoss(epoch, mean_losses, gradients);
  for (int t = 0; t < kHealthTables; ++t) {
    if (gradients[t].values == 0) continue;
    CheckNonFinite(epoch, t, gradients[t]);
    CheckExplosion(epoch, t, gradients[t].norm());
  }
}

void HealthRules::CheckLoss(int epoch, const std::vector<double>& mean_losses,
                            const MinibatchGradients& gradients) const {
  for (size_t k = 0; k < mean_losses.size(); ++k) {
    if (!NonFiniteLoss(mean_losses[k])) continue;
    const std::string model =
        mean_losses.size() > 1 ? " of model " + std::to_string(k) : std::string();
    throw MakeError(Where(epoch, 0), "train:objective_loss", model, " is ", mean_losses[k],
                    " (non-finite loss: the model diverged; this minibatch's gradient_norm ",
                    gradients[0].norm(), ")", kHowToGoOn);
  }
}

void HealthRules::CheckNonFinite(int epoch, int table, const GradientFigures& gradient) const {
  if (gradient.non_finite == 0) return;
  throw MakeError(Where(epoch, table), "nonfinite_share ",
                  static_cast<double>(gradient.non_finite) / static_cast<double>(gradient.values),
                  " (", gradient.non_finite, " of ", gradient.values,
                  " gradient values of a minibatch are NaN or infinite: exploding tensor)",
                  kHowToGoOn);
}

void HealthRules::CheckExplosion(int epoch, int table, double norm) {
  std::deque<double>& recent = norms_[table];
  if (recent.size() >= options_.warmup) {
    const double median = Median(table);
    if (median > 0) largest_ratios_[table] = std::max(largest_ratios_[table], norm / median);
    if (norm > options_.explosion_floor && norm > options_.explosion_factor * median) {
      throw MakeError(Where(epoch, table), "gradient_norm ", norm, " is above ",
                      options_.explosion_factor, " x the median ", median, " of its last ",
                      recent.size(), " minibatches (exploding gradient)", kHowToGoOn);
    }
  }
  recent.push_back(norm);
  if (recent.size() > options_.window) recent.pop_front();
}

std::array<double, kHealthTables> HealthRules::TakeLargestRatios() {
  const std::array<double, kHealthTables> ratios = largest_ratios_;
  largest_ratios_ = {};
  return ratios;
}

double HealthRules::Median(int table) const {
  std::vector<double> sorted(norms_[table].begin(), norms_[table].end());
  const auto middle = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
  std::nth_element(sorted.begin(), middle, sorted.end());
  return *middle;
}

}  // namespace keel
