// HealthRules: the checks that stop a training job that has gone wrong, after
// SageMaker Debugger's built-in rules, applied by every worker to each of its
// minibatches (--health_rules, on by default).
//
// - Non-finite loss: a model's mean training loss over a minibatch is NaN,
//   infinite, or held at the largest float by the loss guard
//   (models/losses.h: every example's loss overflowed). With several models
//   (num_models > 1), any model's: their gradients travel in one push, which
//   the servers refuse whole once one value is non-finite, so the job could
//   not go on with the others anyway.
// - Exploding tensor (Debugger's ExplodingTensor): a gradient value pushed to
//   a table is NaN or infinite.
// - Exploding gradient: a table's gradient norm for one minibatch exceeds
//   `explosion_factor` times the median of its last `window` minibatches on
//   this worker (once `warmup` of them are known), and `explosion_floor`.
//   Keel's thresholds, chosen so that the rule never fires on the built-in
//   jobs at their defaults or configs/: a healthy job's minibatch norms stay
//   within a factor of ten or so of their median (they shrink as training
//   converges), while a diverging one grows geometrically and passes 1000x
//   within tens of minibatches. The floor keeps tables whose gradient
//   settles near zero (a fitted bias) from firing on noise.
//
// Each error names the epoch, the table and the figure, and says how to turn
// the rules off.
//
// A job of several models (num_models > 1) judges each model on its own
// figures (CheckModels): a model a rule fires for is left out from then on
// (the worker pushes none of its gradients, so it stays as it was and the
// others go on; it may still be selected if it is best on validation), and
// only a rule firing for the last model still trained stops the job. The
// models spread their learning rates over two decades (worker/model_variants.h):
// on small dense sets the fastest ones can diverge while the others train well
// (breast_cancer's factorization machine: a model's training loss passed 10^3
// in its first epoch). Not safe for concurrent use: the training thread calls it.
#ifndef KEEL_WORKER_HEALTH_RULES_H_
#define KEEL_WORKER_HEALTH_RULES_H_

#include <array>
#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "worker/training_health.h"

namespace keel {

struct HealthRuleOptions {
  bool on = true;
  double explosion_factor = 1000;
  double explosion_floor = 1;
  size_t window = 256;
  size_t warmup = 20;
};

// A table's last gradient norms, in the order they came and sorted, so that
// their median is one read (every minibatch of every model asks for it).
class NormWindow {
 public:
  size_t size() const { return arrived_.size(); }
  // The norm at the middle (index size() / 2) of the sorted norms; the
  // window must not be empty.
  double Median() const { return sorted_[sorted_.size() / 2]; }
  // Remembers `norm`, forgetting the oldest norm beyond `window`. A NaN is
  // not remembered (the non-finite rules judge a minibatch that makes one).
  void Add(double norm, size_t window);

 private:
  std::deque<double> arrived_;
  std::vector<double> sorted_;
};

class HealthRules {
 public:
  explicit HealthRules(HealthRuleOptions options = {}) : options_(options) {}

  // Checks one minibatch of `epoch`: each model's mean loss per example
  // (`mean_losses`) and the gradients it is about to push. Throws Error
  // naming the epoch, the table and the figure when a rule fires; does
  // nothing when the rules are off.
  void CheckMinibatch(int epoch, const std::vector<double>& mean_losses,
                      const MinibatchGradients& gradients);

  // Checks one minibatch of `epoch` of a job of several models, each model k
  // on its own mean loss and gradients (`mean_losses[k]`, `gradients[k]`),
  // skipping those `left_out`. Returns the models a rule fires for, each with
  // the rule's message, while another model is still trained; throws Error
  // as CheckMinibatch does when a rule fires for the last one. Returns none
  // when the rules are off.
  struct Fired {
    int model;
    std::string why;
  };
  std::vector<Fired> CheckModels(int epoch, const std::vector<double>& mean_losses,
                                 const std::vector<MinibatchGradients>& gradients,
                                 const std::vector<bool>& left_out);

  // The largest ratio of a minibatch's gradient norm to the running median
  // it was judged against, per table (of several models, the largest of any
  // model's), since the last call (0: none judged);
  // how far from explosion_factor the job ran. Resets the figures.
  std::array<double, kHealthTables> TakeLargestRatios();

 private:
  // Recent gradient norms per table (of the whole job, or of one model).
  using Norms = std::array<NormWindow, kHealthTables>;

  // Each returns what fired ("" if nothing): `model` names the model in the
  // message (-1: none named).
  std::string CheckLoss(int epoch, int model, double mean_loss, double norm) const;
  std::string CheckNonFinite(int epoch, int table, int model,
                             const GradientFigures& gradient) const;
  // Compares `norm` with `recent`, then remembers it there.
  std::string CheckExplosion(int epoch, int table, int model, double norm, NormWindow* recent);
  // What fired for a minibatch's `gradients` (of `model`, or -1), "" if
  // nothing; the norms judged against `norms`.
  std::string CheckGradients(int epoch, int model, const MinibatchGradients& gradients,
                             Norms* norms);

  HealthRuleOptions options_;
  Norms norms_;
  std::vector<Norms> model_norms_;  // CheckModels'
  std::array<double, kHealthTables> largest_ratios_{};
};

// True if `mean_loss` counts as non-finite (see above).
bool NonFiniteLoss(double mean_loss);

}  // namespace keel

#endif  // KEEL_WORKER_HEALTH_RULES_H_
