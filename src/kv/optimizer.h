// Optimizers: how a server applies a pushed gradient to a parameter row.
//
// A row in a ParameterTable holds the weights followed by the optimizer's own
// state (none for plain SGD; a velocity for SGD with momentum; accumulators for
// Adagrad, RMSProp, Adam, FTRL; an update count under a learning-rate
// schedule). The server owns the optimizer; workers only push gradients.
//
// Each column of a row has a learning rate and L1/L2 penalties: those of the
// column group that holds it (OptimizerOptions::groups), else the options' own.
// A factorization machine, for one, gives its linear weight (column 0) and its
// factors (columns 1..k) different rates and weight decay.
#ifndef KEEL_KV_OPTIMIZER_H_
#define KEEL_KV_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv/optimizer_interface.h"

namespace keel {

// Staleness-aware steps (Zhang, Gupta, Lian and Liu, 2016: the rate divided by
// the gradient's staleness), softened to the square root: a push `staleness`
// updates late takes 1 / sqrt(max(1, staleness)) of its step. Staleness 0 or 1
// (a worker's own pipeline: its next minibatch's rows are read before its
// current one is pushed) keeps the whole step, so a job with one worker is
// unchanged; the scale is never above 1, whatever the staleness.
float StalenessStepScale(int64_t staleness);

// The optimizer `name` stands for: "auto" is "adam" (adaptive per-coordinate
// steps suit sparse features of unknown scale with no tuning); any other name
// is returned as it is.
std::string ResolveOptimizerName(const std::string& name);

// Throws Error, naming the flag (--learning_rate, --l1, --wd, --beta_1, ...),
// unless every rate is finite and at least the smallest normal float, every penalty non-negative
// and finite, beta1, beta2, momentum and rmsprop_decay in [0, 1), epsilon, ftrl_beta and
// rescale_grad positive and finite, clip_gradient non-negative and finite, the groups non-empty, at
// non-negative columns and disjoint, and no L1 penalty is asked of adam; and, with the schedule
// enabled, step >= 1, factor in (0, 1] and minimum_rate positive and finite.
// Does not check that the name is known.
void ValidateOptimizerOptions(const OptimizerOptions& options);

// The learning rate, penalties and ftrl's beta of each column of rows of one
// width.
struct ColumnSettings {
  // True if no group touches the row: every column has the options' own values.
  bool uniform = true;
  std::vector<float> learning_rate;  // one per column
  std::vector<float> l1;
  std::vector<float> l2;
  std::vector<float> ftrl_beta;
  // Derived from the above for ftrl's step, which then divides once per
  // weight: 1 / learning_rate and ftrl_beta / learning_rate + l2 (the rates
  // before a schedule or a staleness scale, neither of which ftrl takes).
  std::vector<float> inverse_rate;
  std::vector<float> ftrl_offset;
};

// The optimizer `options.name` names. Throws Error for a name other than
// those below or for options ValidateOptimizerOptions rejects. In the
// formulas lr, l1 and l2 are the column's own (see above), g the gradient and
// w the weight.
//
// "sgd", stochastic gradient descent: w -= lr * (g + l2 * w), then the L1
// penalty by soft-thresholding: w = sign(w) * max(0, |w| - lr * l1). No state.
// With momentum > 0 (heavy ball, as MXNet's SGD): v = momentum * v - lr * (g +
// l2 * w); w += v; then the same soft-thresholding. State: the velocities v,
// one per weight.
//
// "adagrad": g' = g + l2 * w; a += g'^2; w -= lr * g' / (sqrt(a) + epsilon),
// then L1 soft-thresholding with the coordinate's rate lr / (sqrt(a) +
// epsilon). State: the accumulators a, one per weight.
//
// "rmsprop" (Tieleman and Hinton, 2012; not centered), d = rmsprop_decay:
// g' = g + l2 * w; s = d * s + (1 - d) * g'^2; w -= lr * g' / (sqrt(s) +
// epsilon), then L1 soft-thresholding with the coordinate's rate lr /
// (sqrt(s) + epsilon). State: the mean squares s, one per weight.
//
// "adam" (Kingma and Ba, 2015): g' = g + l2 * w; m = beta1 m + (1 - beta1) g';
// v = beta2 v + (1 - beta2) g'^2; w -= lr * mhat / (sqrt(vhat) + epsilon),
// with mhat = m / (1 - beta1^t), vhat = v / (1 - beta2^t) and t the number of
// updates of the row so far, this one included. State: m (one per weight),
// v (one per weight), then t.
//
// "ftrl", FTRL-proximal (McMahan et al., 2013), alpha = lr, beta = ftrl_beta
// (a column group's own where it gives one),
// lambda1 = l1, lambda2 = l2: sigma = (sqrt(n + g^2) - sqrt(n)) / alpha;
// z += g - sigma * w; n += g^2; w = 0 if |z| <= l1, else
// -(z - sign(z) l1) / ((beta + sqrt(n)) / alpha + l2). A large l1 leaves
// weights at exactly zero. A weight's first update starts z where the formula
// gives the weight it has (its initializer's value). State: z (one per
// weight), then n (one per weight).
//
// "auto": "adam" (ResolveOptimizerName).
//
// Every optimizer first shapes the gradient when options.rescale_grad is not
// 1 or options.clip_gradient is positive (kv/gradient_shaping.h): g is
// replaced by clip(rescale_grad * g) before the formulas above, so that the
// weight decay l2 * w is neither rescaled nor clipped.
//
// With options.schedule enabled (every optimizer but ftrl), one more float
// follows the state: the row's update count, exact up to 2^24 updates (far
// past the point where any factor below 1 has reached the minimum rate).
// The count is per row, not per table, so that it travels with the row
// through checkpoints, replication and re-sharding, and needs no agreement
// between servers; rarely seen features keep a high rate for longer, as they
// do under Adagrad.
std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerOptions& options);

// Whether this CPU runs the optimizers' AVX2 copies of their row loops
// (OptimizerOptions::wide_vectors): an x86-64 CPU with AVX2 and an OS that
// keeps its registers.
bool WideVectorStepsAvailable();

}  // namespace keel

#endif  // KEEL_KV_OPTIMIZER_H_
