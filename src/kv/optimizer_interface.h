// Optimizer: the interface of a server's optimizers, and OptimizerOptions, a
// table's choice of optimizer and its settings. The optimizers, their
// formulas and MakeOptimizer, which makes the one the options name:
// kv/optimizer.h; gradient shaping, which wraps any optimizer:
// kv/gradient_shaping.h.
#ifndef KEEL_KV_OPTIMIZER_INTERFACE_H_
#define KEEL_KV_OPTIMIZER_INTERFACE_H_

#include <cstddef>
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
    float ftrl_beta = 0.0f;  // ftrl: the group's own beta (0: the options' ftrl_beta)
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
  // Steps rows of one weight or of at least 8 with the CPU's 256-bit vectors
  // (AVX2) where an x86-64 CPU has them: the same operations as the baseline
  // build's (no contraction into fused multiply-adds), so the same bits; a
  // row of 8 models' weights steps in one vector instead of two. False: the
  // baseline's instructions (tests compare the two).
  bool wide_vectors = true;
};

// `group`'s ftrl beta: its own, or `options`' where it gives none (0).
inline float FtrlBetaOf(const OptimizerOptions::ColumnGroup& group,
                        const OptimizerOptions& options) {
  return group.ftrl_beta > 0.0f ? group.ftrl_beta : options.ftrl_beta;
}

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

}  // namespace keel

#endif  // KEEL_KV_OPTIMIZER_INTERFACE_H_
