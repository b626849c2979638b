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

namespace keel {

struct OptimizerOptions {
  // Columns [begin, end) of every row, with their own rate and penalties.
  // Columns past a row's width are ignored. Groups must not overlap.
  struct ColumnGroup {
    int begin = 0;
    int end = 0;
    float learning_rate = 0.01f;
    float l1 = 0.0f;
    float l2 = 0.0f;
  };

  // The learning-rate schedule (SageMaker's use_lr_scheduler and
  // lr_scheduler_*): a row's update number k + 1 (k updates before it) uses
  // rate * factor^floor(k / step), never below min(rate, minimum_rate), for
  // every column's own rate. The count k is the row's own, kept in the row
  // (see MakeOptimizer). Off by default: a table that sums (rate 1 SGD)
  // must not decay.
  struct Schedule {
    bool enabled = false;
    int step = 100;              // updates of a row between decreases, >= 1
    float factor = 0.99f;        // in (0, 1]
    float minimum_rate = 1e-5f;  // positive
  };

  std::string name = "sgd";     // "sgd", "adagrad", "rmsprop", "adam", "ftrl" or "auto" (adam)
  float learning_rate = 0.01f;  // FTRL's alpha
  float l1 = 0.0f;              // L1 penalty (not supported by adam)
  float l2 = 0.0f;              // L2 penalty (weight decay)
  float beta1 = 0.9f;           // adam: decay of the first moment
  float beta2 = 0.999f;         // adam: decay of the second moment
  float momentum = 0.0f;        // sgd: decay of the velocity, in [0, 1); 0: plain SGD
  float rmsprop_decay = 0.9f;   // rmsprop: decay of the mean square, in [0, 1)
  float epsilon = 1e-8f;        // adagrad, rmsprop, adam: added to the denominator
  // Gradient shaping before the step (kv/gradient_shaping.h): g = clip(rescale_grad * g) with
  // clip projecting onto [-clip_gradient, clip_gradient]; clip_gradient 0: no clipping.
  float rescale_grad = 1.0f;   // positive
  float clip_gradient = 0.0f;  // non-negative
  float ftrl_beta = 1.0f;      // ftrl: beta of the per-coordinate rate
  Schedule schedule;           // ignored by ftrl (its rate decays per coordinate already)
  std::vector<ColumnGroup> groups;
  // Staleness-aware steps: the server scales each push's step by
  // StalenessStepScale of the push's staleness (server/push_staleness.h).
  // Off by default: a table that sums (rate 1 SGD) must add every push whole.
  bool staleness_aware = false;
};

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
// unless every rate is positive and finite, every penalty non-negative and
// finite, beta1, beta2, momentum and rmsprop_decay in [0, 1), epsilon,
// ftrl_beta and rescale_grad positive and finite, clip_gradient non-negative
// and finite, the groups non-empty, at non-negative columns
// and disjoint, and no L1 penalty is asked of adam; and, with the schedule
// enabled, step >= 1, factor in (0, 1] and minimum_rate positive and finite.
// Does not check that the name is known.
void ValidateOptimizerOptions(const OptimizerOptions& options);

// The learning rate and penalties of each column of rows of one width.
struct ColumnSettings {
  // True if no group touches the row: every column has the options' own values.
  bool uniform = true;
  std::vector<float> learning_rate;  // one per column
  std::vector<float> l1;
  std::vector<float> l2;
};

// Not synchronized: a server applies updates from one thread.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual const char* name() const = 0;
  // Floats of optimizer state kept after `weight_width` weights in each row.
  virtual int StateWidth(int weight_width) const = 0;
  // Applies `gradient` (width floats) to `row`: row[0, width) are the weights,
  // then StateWidth(width) floats of state, zero on a new row.
  virtual void Update(float* row, const float* gradient, int width) = 0;
  // Applies gradients[i * width, (i + 1) * width) to rows[i] for each of
  // `count` rows, each step scaled by `step_scale` (in (0, 1]; 1: the
  // optimizer's own step): every rate is multiplied by it, after the
  // schedule's decrease; FTRL, whose rate is not a step size (its weights are
  // a closed form of the summed gradients), multiplies the gradients instead.
  virtual void UpdateRows(float* const* rows, const float* gradients, size_t count, int width,
                          float step_scale) = 0;
  // UpdateRows with the optimizer's own step.
  void UpdateRows(float* const* rows, const float* gradients, size_t count, int width) {
    UpdateRows(rows, gradients, count, width, 1.0f);
  }
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
// "ftrl", FTRL-proximal (McMahan et al., 2013), alpha = lr, beta = ftrl_beta,
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

}  // namespace keel

#endif  // KEEL_KV_OPTIMIZER_H_
