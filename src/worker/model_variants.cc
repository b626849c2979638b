#include "worker/model_variants.h"

#include <cmath>
#include <cstdlib>

#include "base/error.h"

namespace keel {
namespace {

// The fractional part of k * step: an even spread over [0, 1).
double Weyl(int k, double step) { return std::fmod(k * step, 1.0); }

constexpr double kGolden = 0.6180339887498949;  // (sqrt(5) - 1) / 2
constexpr double kSilver = 0.4142135623730950;  // sqrt(2) - 1
constexpr double kBronze = 0.7320508075688772;  // sqrt(3) - 1

}  // namespace

std::vector<ModelVariant> SpreadModels(int num_models, const OptimizerOptions& weights,
                                       JobKind job) {
  const bool takes_l1 = ResolveOptimizerName(weights.name) != "adam";
  std::vector<ModelVariant> variants(static_cast<size_t>(std::max(num_models, 1)));
  for (int k = 1; k < num_models; ++k) {
    ModelVariant& variant = variants[k];
    variant.learning_rate_scale = static_cast<float>(std::pow(10.0, -1.0 + 2.0 * Weyl(k, kGolden)));
    if (k % 2 == 0) variant.wd = static_cast<float>(std::pow(10.0, -7.0 + 4.0 * Weyl(k, kSilver)));
    if (takes_l1 && k % 3 == 0) {
      variant.l1 = static_cast<float>(std::pow(10.0, -7.0 + 4.0 * Weyl(k, kBronze)));
    }
  }
  if (job == JobKind::kFactorizationMachines && num_models >= 2) {
    ModelVariant linear;
    linear.linear_only = true;
    variants.back() = linear;
  }
  return variants;
}

int AutoNumModels(const Hyperparameters& hyperparameters) {
  (void)hyperparameters;
  return 8;
}

int ParseNumModels(const std::string& value, const Hyperparameters& hyperparameters) {
  if (value == "auto") return AutoNumModels(hyperparameters);
  char* end = nullptr;
  const long number = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || number < 1 || number > kMaxModels) {
    throw MakeError("--num_models '", value, "' is not auto or an integer in 1..", kMaxModels);
  }
  return static_cast<int>(number);
}

Hyperparameters WithModels(Hyperparameters hyperparameters, int num_models) {
  hyperparameters.num_models = num_models;
  hyperparameters.variants =
      SpreadModels(num_models, hyperparameters.weights_optimizer, hyperparameters.job);
  return hyperparameters;
}

}  // namespace keel
