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

// A factorization machine's ftrl models whose spread rate is near the given
// one (from half to twice it, model 0 aside) step instead with a thousandth
// of the beta, a fifth of that rate and a factors penalty of 0.1: a second
// family beside the others, which validation picks between (Trainer's
// selection lets it compete on enough rows only). The factors of rare
// features move on their first minibatches and the penalty holds them, where
// a beta of 1 (on minibatch means) holds them by moving them slowly; which
// fits better depends on the data (on `keel datagen` FM sets the first at
// 10^6 rows, the second at 3x10^5), and ftrl's best rate falls with its beta
// (x0.15-0.3 of the given one at 10^6 rows; the beta-1 family's best there is
// x5.1). The spread's low and high rates stay: small dense sets pick the low
// ones (fair), datagen's the high (docs/BENCHMARKS.md, "Defaults").
constexpr float kFastBetaFromRate = 0.5f;
constexpr float kFastBetaBelowRate = 2.0f;
constexpr float kFastBetaRateScale = 0.2f;
constexpr float kFastBetaScale = 0.001f;
constexpr float kFastBetaFactorsWd = 0.1f;

}  // namespace

std::vector<ModelVariant> SpreadModels(int num_models, const OptimizerOptions& weights, JobKind job,
                                       bool fast_beta) {
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
  if (fast_beta && job == JobKind::kFactorizationMachines &&
      ResolveOptimizerName(weights.name) == "ftrl") {
    for (int k = 1; k < num_models; ++k) {
      ModelVariant& variant = variants[k];
      if (variant.learning_rate_scale < kFastBetaFromRate ||
          variant.learning_rate_scale >= kFastBetaBelowRate) {
        continue;
      }
      variant.learning_rate_scale *= kFastBetaRateScale;
      variant.ftrl_beta_scale = kFastBetaScale;
      variant.factors_wd = kFastBetaFactorsWd;
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
  hyperparameters.variants = SpreadModels(num_models, hyperparameters.weights_optimizer,
                                          hyperparameters.job, hyperparameters.fast_beta_models);
  return hyperparameters;
}

}  // namespace keel
