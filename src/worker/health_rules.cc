#include "worker/health_rules.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"

namespace keel {
namespace {

constexpr const char* kHowToGoOn = " (--health_rules=off lets the job go on)";

std::string Where(int epoch, int table) {
  return std::string("training health: epoch ") + std::to_string(epoch) + ", table " +
         HealthTableName(table) + ": ";
}

// " of model K" in a message about model K of several; "" for -1.
std::string OfModel(int model) {
  return model < 0 ? std::string() : " of model " + std::to_string(model);
}

}  // namespace

void NormWindow::Add(double norm, size_t window) {
  if (std::isnan(norm)) return;  // unordered: it would break the sorted norms
  arrived_.push_back(norm);
  sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), norm), norm);
  if (arrived_.size() <= window) return;
  sorted_.erase(std::lower_bound(sorted_.begin(), sorted_.end(), arrived_.front()));
  arrived_.pop_front();
}

bool NonFiniteLoss(double mean_loss) {
  return !std::isfinite(mean_loss) || mean_loss >= std::numeric_limits<float>::max();
}

void HealthRules::CheckMinibatch(int epoch, const std::vector<double>& mean_losses,
                                 const MinibatchGradients& gradients) {
  if (!options_.on) return;
  for (size_t k = 0; k < mean_losses.size(); ++k) {
    const int named = mean_losses.size() > 1 ? static_cast<int>(k) : -1;
    const std::string why = CheckLoss(epoch, named, mean_losses[k], gradients[0].norm());
    if (!why.empty()) throw MakeError(why, kHowToGoOn);
  }
  const std::string why = CheckGradients(epoch, -1, gradients, &norms_);
  if (!why.empty()) throw MakeError(why, kHowToGoOn);
}

std::vector<HealthRules::Fired> HealthRules::CheckModels(
    int epoch, const std::vector<double>& mean_losses,
    const std::vector<MinibatchGradients>& gradients, const std::vector<bool>& left_out) {
  std::vector<Fired> fired;
  if (!options_.on) return fired;
  model_norms_.resize(gradients.size());
  const auto is_left_out = [&left_out](size_t k) { return k < left_out.size() && left_out[k]; };
  size_t trained = 0;
  for (size_t k = 0; k < gradients.size(); ++k) trained += is_left_out(k) ? 0 : 1;
  for (size_t k = 0; k < gradients.size(); ++k) {
    if (is_left_out(k)) continue;
    const int model = static_cast<int>(k);
    std::string why = CheckLoss(epoch, model, mean_losses.at(k), gradients[k][0].norm());
    if (why.empty()) why = CheckGradients(epoch, model, gradients[k], &model_norms_[k]);
    if (why.empty()) continue;
    if (trained - fired.size() <= 1) throw MakeError(why, kHowToGoOn);
    fired.push_back({model, why});
  }
  return fired;
}

std::string HealthRules::CheckGradients(int epoch, int model, const MinibatchGradients& gradients,
                                        Norms* norms) {
  for (int t = 0; t < kHealthTables; ++t) {
    if (gradients[t].values == 0) continue;
    std::string why = CheckNonFinite(epoch, t, model, gradients[t]);
    if (why.empty()) why = CheckExplosion(epoch, t, model, gradients[t].norm(), &(*norms)[t]);
    if (!why.empty()) return why;
  }
  return "";
}

std::string HealthRules::CheckLoss(int epoch, int model, double mean_loss, double norm) const {
  if (!NonFiniteLoss(mean_loss)) return "";
  return MakeMessage(Where(epoch, 0), "train:objective_loss", OfModel(model), " is ", mean_loss,
                     " (non-finite loss: the model diverged; this minibatch's gradient_norm ", norm,
                     ")");
}

std::string HealthRules::CheckNonFinite(int epoch, int table, int model,
                                        const GradientFigures& gradient) const {
  if (gradient.non_finite == 0) return "";
  return MakeMessage(
      Where(epoch, table), "nonfinite_share", OfModel(model), " ",
      static_cast<double>(gradient.non_finite) / static_cast<double>(gradient.values), " (",
      gradient.non_finite, " of ", gradient.values,
      " gradient values of a minibatch are NaN or infinite: exploding tensor)");
}

std::string HealthRules::CheckExplosion(int epoch, int table, int model, double norm,
                                        NormWindow* recent) {
  std::string why;
  if (recent->size() >= options_.warmup) {
    const double median = recent->Median();
    if (median > 0) largest_ratios_[table] = std::max(largest_ratios_[table], norm / median);
    if (norm > options_.explosion_floor && norm > options_.explosion_factor * median) {
      why = MakeMessage(Where(epoch, table), "gradient_norm", OfModel(model), " ", norm,
                        " is above ", options_.explosion_factor, " x the median ", median,
                        " of its last ", recent->size(), " minibatches (exploding gradient)");
    }
  }
  recent->Add(norm, options_.window);
  return why;
}

std::array<double, kHealthTables> HealthRules::TakeLargestRatios() {
  const std::array<double, kHealthTables> ratios = largest_ratios_;
  largest_ratios_ = {};
  return ratios;
}

}  // namespace keel
