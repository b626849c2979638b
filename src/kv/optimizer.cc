#include "kv/optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <type_traits>

#include "base/cpu_features.h"
#include "base/error.h"
#include "kv/gradient_shaping.h"

namespace keel {
namespace {

// The steps below are always inlined, so that both copies of the row loops
// (StepOptimizer: the baseline's and AVX2's) get their own vectorized steps,
// whatever the compiler's size heuristics or optimization level. The AVX2
// copy gives the same bits because this file is built without contraction
// into fused multiply-adds (CMakeLists.txt: -ffp-contract=off) and every
// step works column by column.
#if defined(__GNUC__) || defined(__clang__)
#define KEEL_STEP_INLINE inline __attribute__((always_inline))
#else
#define KEEL_STEP_INLINE inline
#endif

// Moves `weight` towards zero by `threshold`, to exactly zero if it would
// cross it. A threshold of zero leaves the weight as it is (NaN included).
KEEL_STEP_INLINE float SoftThreshold(float weight, float threshold) {
  return std::fabs(weight) <= threshold && threshold > 0.0f
             ? 0.0f
             : weight - std::copysign(threshold, weight);
}

void CheckPositive(float value, const std::string& what) {
  if (!std::isfinite(value) || value <= 0) {
    throw MakeError(what, "=", value, ": must be a positive finite number");
  }
}

// A rate: positive, finite and normal (ftrl steps with 1 / rate, which a
// subnormal rate makes infinite).
void CheckRate(float value, const std::string& what) {
  if (!std::isfinite(value) || value < std::numeric_limits<float>::min()) {
    throw MakeError(what, "=", value, ": must be a finite number of at least ",
                    std::numeric_limits<float>::min(), " (the smallest normal float)");
  }
}

void CheckNonNegative(float value, const std::string& what) {
  if (!std::isfinite(value) || value < 0) {
    throw MakeError(what, "=", value, ": must be a non-negative finite number");
  }
}

void CheckDecay(float value, const std::string& what) {
  if (!(value >= 0 && value < 1)) throw MakeError(what, "=", value, ": must be in [0, 1)");
}

void CheckSchedule(const OptimizerOptions::Schedule& schedule) {
  if (!schedule.enabled) return;
  if (schedule.step < 1) {
    throw MakeError("--lr_scheduler_step=", schedule.step, ": must be a positive integer");
  }
  if (!(schedule.factor > 0 && schedule.factor <= 1)) {
    throw MakeError("--lr_scheduler_factor=", schedule.factor, ": must be in (0, 1]");
  }
  CheckPositive(schedule.minimum_rate, "--lr_scheduler_minimum_lr");
}

// SGD with one rate and L2 penalty for every column and no L1 penalty.
// __restrict lets long rows vectorize.
KEEL_STEP_INLINE void SgdStep(float* __restrict row, const float* __restrict gradient, int width,
                              float rate, float decay) {
  if (decay == 0.0f) {
    for (int i = 0; i < width; ++i) row[i] -= rate * gradient[i];
  } else {
    for (int i = 0; i < width; ++i) row[i] -= rate * (gradient[i] + decay * row[i]);
  }
}

// SGD with each column's own rate and penalties.
KEEL_STEP_INLINE void SgdColumnStep(float* __restrict row, const float* __restrict gradient,
                                    int width, const ColumnSettings& columns) {
  const float* rate = columns.learning_rate.data();
  const float* l1 = columns.l1.data();
  const float* l2 = columns.l2.data();
  for (int i = 0; i < width; ++i) {
    const float weight = row[i] - rate[i] * (gradient[i] + l2[i] * row[i]);
    row[i] = SoftThreshold(weight, rate[i] * l1[i]);
  }
}

// The step rules of MakeOptimizer's formulas (optimizer.h), one per optimizer
// but SGD. A step has the optimizer's name, its state width, a constructor
// taking the options, and applies one gradient to one row; StepOptimizer
// makes it an Optimizer.

// Row layout: weights only. SGD's StepOptimizer form, for rows that carry a
// schedule's count (SgdOptimizer below serves plain SGD).
struct PlainSgdStep {
  static constexpr const char* kName = "sgd";
  static constexpr bool kScalesGradient = false;
  static int StateWidth(int /*weight_width*/) { return 0; }
  explicit PlainSgdStep(const OptimizerOptions& /*options*/) {}

  KEEL_STEP_INLINE void operator()(float* __restrict row, const float* __restrict gradient,
                                   int width, const ColumnSettings& columns) const {
    SgdColumnStep(row, gradient, width, columns);
  }
};

// Row layout: weights, then one velocity per weight.
struct MomentumStep {
  static constexpr const char* kName = "sgd";
  static constexpr bool kScalesGradient = false;
  static int StateWidth(int weight_width) { return weight_width; }
  explicit MomentumStep(const OptimizerOptions& options) : momentum_(options.momentum) {}

  KEEL_STEP_INLINE void operator()(float* __restrict row, const float* __restrict gradient,
                                   int width, const ColumnSettings& columns) const {
    const float momentum = momentum_;
    float* __restrict velocity = row + width;
    const float* rate = columns.learning_rate.data();
    const float* l1 = columns.l1.data();
    const float* l2 = columns.l2.data();
    for (int i = 0; i < width; ++i) {
      velocity[i] = momentum * velocity[i] - rate[i] * (gradient[i] + l2[i] * row[i]);
      row[i] = SoftThreshold(row[i] + velocity[i], rate[i] * l1[i]);
    }
  }

  float momentum_;
};

// Adagrad's and RMSprop's rule: each weight's step is its rate over the root
// of its own running sum of squared gradients (row + width holds one a
// weight), which `accumulate(sum, g)` updates with the gradient g.
template <typename Accumulate>
KEEL_STEP_INLINE void RootScaledStep(float* __restrict row, const float* __restrict gradient,
                                     int width, const ColumnSettings& columns, float epsilon,
                                     Accumulate accumulate) {
  float* __restrict squares = row + width;
  const float* rate = columns.learning_rate.data();
  const float* l1 = columns.l1.data();
  const float* l2 = columns.l2.data();
  for (int i = 0; i < width; ++i) {
    const float g = gradient[i] + l2[i] * row[i];
    squares[i] = accumulate(squares[i], g);
    const float step = rate[i] / (std::sqrt(squares[i]) + epsilon);
    row[i] = SoftThreshold(row[i] - step * g, step * l1[i]);
  }
}

// Row layout: weights, then one accumulator per weight.
struct AdagradStep {
  static constexpr const char* kName = "adagrad";
  static constexpr bool kScalesGradient = false;
  static int StateWidth(int weight_width) { return weight_width; }
  explicit AdagradStep(const OptimizerOptions& options) : epsilon_(options.epsilon) {}

  KEEL_STEP_INLINE void operator()(float* __restrict row, const float* __restrict gradient,
                                   int width, const ColumnSettings& columns) const {
    RootScaledStep(row, gradient, width, columns, epsilon_,
                   [](float sum, float g) { return sum + g * g; });
  }

  float epsilon_;
};

// Row layout: weights, then one mean square per weight.
struct RmspropStep {
  static constexpr const char* kName = "rmsprop";
  static constexpr bool kScalesGradient = false;
  static int StateWidth(int weight_width) { return weight_width; }
  explicit RmspropStep(const OptimizerOptions& options)
      : decay_(options.rmsprop_decay), epsilon_(options.epsilon) {}

  KEEL_STEP_INLINE void operator()(float* __restrict row, const float* __restrict gradient,
                                   int width, const ColumnSettings& columns) const {
    const float decay = decay_;
    RootScaledStep(row, gradient, width, columns, epsilon_, [decay](float mean_square, float g) {
      return decay * mean_square + (1.0f - decay) * g * g;
    });
  }

  float decay_, epsilon_;
};

// Row layout: weights, first moments, second moments, step count.
struct AdamStep {
  static constexpr const char* kName = "adam";
  static constexpr bool kScalesGradient = false;
  static int StateWidth(int weight_width) { return 2 * weight_width + 1; }
  explicit AdamStep(const OptimizerOptions& options)
      : beta1_(options.beta1), beta2_(options.beta2), epsilon_(options.epsilon) {}

  KEEL_STEP_INLINE void operator()(float* __restrict row, const float* __restrict gradient,
                                   int width, const ColumnSettings& columns) const {
    const float beta1 = beta1_, beta2 = beta2_, epsilon = epsilon_;
    float* __restrict first_moment = row + width;
    float* __restrict second_moment = first_moment + width;
    float& steps = second_moment[width];
    // Exact up to 2^24 steps; past that, the bias correction is 1 anyway.
    steps += 1.0f;
    const float first_correction = static_cast<float>(1.0 / (1.0 - std::pow(double{beta1}, steps)));
    const float second_correction =
        static_cast<float>(1.0 / (1.0 - std::pow(double{beta2}, steps)));
    const float* rate = columns.learning_rate.data();
    const float* l2 = columns.l2.data();
    for (int i = 0; i < width; ++i) {
      const float g = gradient[i] + l2[i] * row[i];
      first_moment[i] = beta1 * first_moment[i] + (1.0f - beta1) * g;
      second_moment[i] = beta2 * second_moment[i] + (1.0f - beta2) * g * g;
      row[i] -= rate[i] * (first_moment[i] * first_correction) /
                (std::sqrt(second_moment[i] * second_correction) + epsilon);
    }
  }

  float beta1_, beta2_, epsilon_;
};

// Row layout: weights, z, n.
struct FtrlStep {
  static constexpr const char* kName = "ftrl";
  // Its rate is not a step size: a staleness scale weighs the gradient.
  static constexpr bool kScalesGradient = true;
  static int StateWidth(int weight_width) { return 2 * weight_width; }
  explicit FtrlStep(const OptimizerOptions& /*options*/) {}

  KEEL_STEP_INLINE void operator()(float* __restrict row, const float* __restrict gradient,
                                   int width, const ColumnSettings& columns) const {
    float* __restrict z = row + width;
    float* __restrict n = z + width;
    const float* l1 = columns.l1.data();
    const float* inverse_alpha = columns.inverse_rate.data();
    const float* offset = columns.ftrl_offset.data();  // beta / alpha + l2
    // Branch-free (selections compute both sides), so the compiler vectorises
    // the columns: a row of many models' weights steps them side by side.
    for (int i = 0; i < width; ++i) {
      const float g = gradient[i];
      const float w = row[i];
      // First update of an initialized weight: start z where the closed form
      // below gives that weight back, so FTRL starts from the initializer's
      // value (a factorization machine's factors must not all start at 0).
      const float first_z = -w * offset[i] - std::copysign(l1[i], w);
      const bool fresh = (n[i] == 0.0f) & (w != 0.0f);
      const float z0 = fresh ? first_z : z[i];
      const float old_root = std::sqrt(n[i]);
      const float n1 = n[i] + g * g;
      const float new_root = std::sqrt(n1);
      const float sigma = (new_root - old_root) * inverse_alpha[i];
      const float z1 = z0 + (g - sigma * w);
      // (beta + sqrt(n)) / alpha + l2, one division left.
      const float shrunk =
          -(z1 - std::copysign(l1[i], z1)) / (new_root * inverse_alpha[i] + offset[i]);
      row[i] = std::fabs(z1) <= l1[i] ? 0.0f : shrunk;
      z[i] = z1;
      n[i] = n1;
    }
  }

  // Rows of one weight (a linear model's) in blocks: operator()'s arithmetic,
  // operation for operation, over arrays the compiler vectorises (each row's
  // step alone is a chain of two square roots and a division).
  KEEL_STEP_INLINE void UpdateWidthOne(float* const* rows, const float* gradients, size_t count,
                                       const ColumnSettings& columns) const {
    constexpr size_t kBlock = 64;
    const float l1 = columns.l1[0];
    const float inverse_alpha = columns.inverse_rate[0], offset = columns.ftrl_offset[0];
    float weights[kBlock], zs[kBlock], ns[kBlock];
    for (size_t begin = 0; begin < count; begin += kBlock) {
      const size_t m = std::min(kBlock, count - begin);
      float* const* block = rows + begin;
      const float* g = gradients + begin;
      for (size_t i = 0; i < m; ++i) {
        weights[i] = block[i][0];
        zs[i] = block[i][1];
        ns[i] = block[i][2];
      }
      for (size_t i = 0; i < m; ++i) {
        const float w = weights[i];
        const float first_z = -w * offset - std::copysign(l1, w);
        // Branch-free selections (& rather than &&), so the loop vectorises.
        const bool fresh = (ns[i] == 0.0f) & (w != 0.0f);
        const float z0 = fresh ? first_z : zs[i];
        const float old_root = std::sqrt(ns[i]);
        const float n = ns[i] + g[i] * g[i];
        const float new_root = std::sqrt(n);
        const float sigma = (new_root - old_root) * inverse_alpha;
        const float z = z0 + (g[i] - sigma * w);
        const float shrunk = -(z - std::copysign(l1, z)) / (new_root * inverse_alpha + offset);
        weights[i] = std::fabs(z) <= l1 ? 0.0f : shrunk;
        zs[i] = z;
        ns[i] = n;
      }
      for (size_t i = 0; i < m; ++i) {
        block[i][0] = weights[i];
        block[i][1] = zs[i];
        block[i][2] = ns[i];
      }
    }
  }
};

// Whether `Step` has a blocked path for rows of one weight.
template <typename Step, typename = void>
struct HasWidthOnePath : std::false_type {};
template <typename Step>
struct HasWidthOnePath<Step, std::void_t<decltype(&Step::UpdateWidthOne)>> : std::true_type {};

// The columns ColumnSettings derives from its rates, penalties and betas.
void DeriveColumns(ColumnSettings* settings) {
  const size_t columns = settings->learning_rate.size();
  settings->inverse_rate.resize(columns);
  settings->ftrl_offset.resize(columns);
  for (size_t c = 0; c < columns; ++c) {
    const float alpha = settings->learning_rate[c];
    settings->inverse_rate[c] = 1.0f / alpha;
    settings->ftrl_offset[c] = settings->ftrl_beta[c] / alpha + settings->l2[c];
  }
}

// ColumnSettings per row width, resolved from the options on the first use of
// each width. Not synchronized.
class ColumnSettingsCache {
 public:
  explicit ColumnSettingsCache(const OptimizerOptions& options) : options_(options) {}
  const ColumnSettings& For(int width) {
    if (width != last_width_) Resolve(width);
    return *last_;
  }

 private:
  void Resolve(int width);

  OptimizerOptions options_;
  int last_width_ = -1;
  const ColumnSettings* last_ = nullptr;
  std::map<int, ColumnSettings> by_width_;
};

// The column settings of a row under the learning-rate schedule and a
// push's staleness scale: the base settings with each rate decreased for the
// row's update count (optimizer.h), then multiplied by the scale.
// Recomputed only when the base, the number of decreases or the scale
// changes, into vectors reused across rows. Not synchronized.
class ScheduledRates {
 public:
  explicit ScheduledRates(const OptimizerOptions::Schedule& schedule) : schedule_(schedule) {}
  // The settings for a row updated `updates` times before (ignored without
  // the schedule), in a push whose steps are scaled by `step_scale`.
  const ColumnSettings& For(const ColumnSettings& base, float updates, float step_scale) {
    const long long decreases =
        schedule_.enabled ? static_cast<long long>(updates) / schedule_.step : 0;
    if (decreases == 0 && step_scale == 1.0f) return base;
    if (&base != base_ || decreases != decreases_ || step_scale != step_scale_) {
      Resolve(base, decreases, step_scale);
    }
    return scaled_;
  }

 private:
  void Resolve(const ColumnSettings& base, long long decreases, float step_scale) {
    if (&base != base_) {
      scaled_ = base;
      base_ = &base;
    }
    const double multiplier = Multiplier(decreases);
    for (size_t c = 0; c < base.learning_rate.size(); ++c) {
      const float rate = base.learning_rate[c];
      const float floor = std::min(rate, schedule_.minimum_rate);
      scaled_.learning_rate[c] =
          std::max(static_cast<float>(rate * multiplier), floor) * step_scale;
    }
    // The derived columns stay the base's: their one reader, ftrl, has no
    // schedule and takes a staleness scale on its gradient.
    decreases_ = decreases;
    step_scale_ = step_scale;
  }

  // factor^decreases. Rows of one push have all kinds of update counts, so
  // the powers are kept in a table (up to kTabled of them) rather than
  // recomputed with pow for each row.
  double Multiplier(long long decreases) {
    static constexpr long long kTabled = 1 << 16;
    if (decreases >= kTabled) {
      return std::pow(double{schedule_.factor}, static_cast<double>(decreases));
    }
    if (powers_.empty()) powers_.push_back(1.0);
    while (static_cast<long long>(powers_.size()) <= decreases) {
      powers_.push_back(powers_.back() * schedule_.factor);
    }
    return powers_[static_cast<size_t>(decreases)];
  }

  OptimizerOptions::Schedule schedule_;
  const ColumnSettings* base_ = nullptr;
  long long decreases_ = 0;
  float step_scale_ = 1.0f;
  ColumnSettings scaled_;
  std::vector<double> powers_;  // powers_[d] = factor^d
};

// The optimizer of one step rule: resolves each width's column settings and
// applies `Step` row by row (inlined: the loops are the server's hot path).
// Under a schedule, the row's update count follows the step's state. The
// loops are compiled twice, for the baseline x86-64 target and for AVX2
// (OptimizerOptions::wide_vectors), and run as the CPU allows.
template <typename Step>
class StepOptimizer final : public Optimizer {
 public:
  explicit StepOptimizer(const OptimizerOptions& options)
      : step_(options),
        scheduled_(options.schedule.enabled),
        avx2_(options.wide_vectors && WideVectorStepsAvailable()),
        columns_(options),
        rates_(options.schedule) {
    ValidateOptimizerOptions(options);
  }
  const char* name() const override { return Step::kName; }
  int StateWidth(int weight_width) const override {
    return Step::StateWidth(weight_width) + (scheduled_ ? 1 : 0);
  }
  void Update(float* row, const float* gradient, int width) override {
    UpdateRows(&row, gradient, 1, width, 1.0f);
  }
  void UpdateRows(float* const* rows, const float* gradients, size_t count, int width,
                  float step_scale) override {
    if (Step::kScalesGradient && step_scale != 1.0f) {
      gradients = ScaledGradients(gradients, count * static_cast<size_t>(width), step_scale);
      step_scale = 1.0f;
    }
    const ColumnSettings& columns = columns_.For(width);
    // AVX2's 8 lanes pay on rows of at least 8 weights and on FTRL's blocks of
    // one-weight rows; a narrower row fits none of them, so its columns would
    // step one at a time, slower than the baseline's 4 lanes (widths 2 and 5
    // measured 1.2x slower).
    if (avx2_ && (width >= 8 || (width == 1 && HasWidthOnePath<Step>::value))) {
      return StepRowsAvx2(rows, gradients, count, width, step_scale, columns);
    }
    StepRows(rows, gradients, count, width, step_scale, columns);
  }

 private:
  // Inlined into both callers below, so each compiles the steps for its target.
  KEEL_STEP_INLINE void StepRows(float* const* rows, const float* gradients, size_t count,
                                 int width, float step_scale, const ColumnSettings& columns) {
    if (!scheduled_ && step_scale == 1.0f) {
      if constexpr (HasWidthOnePath<Step>::value) {
        if (width == 1) return step_.UpdateWidthOne(rows, gradients, count, columns);
      }
      for (size_t i = 0; i < count; ++i) step_(rows[i], gradients + i * width, width, columns);
      return;
    }
    const int count_column = width + Step::StateWidth(width);
    for (size_t i = 0; i < count; ++i) {
      const float updates = scheduled_ ? rows[i][count_column] : 0.0f;
      const ColumnSettings& rates = rates_.For(columns, updates, step_scale);
      if (scheduled_) rows[i][count_column] = updates + 1.0f;
      step_(rows[i], gradients + i * width, width, rates);
    }
  }

  KEEL_TARGET_AVX2 void StepRowsAvx2(float* const* rows, const float* gradients, size_t count,
                                     int width, float step_scale, const ColumnSettings& columns) {
    StepRows(rows, gradients, count, width, step_scale, columns);
  }

  // `gradients` times `scale`, in a buffer reused across pushes.
  const float* ScaledGradients(const float* gradients, size_t size, float scale) {
    scaled_gradients_.resize(size);
    for (size_t i = 0; i < size; ++i) scaled_gradients_[i] = gradients[i] * scale;
    return scaled_gradients_.data();
  }

  const Step step_;
  const bool scheduled_;
  const bool avx2_;  // steps with AVX2 (StepRowsAvx2)
  ColumnSettingsCache columns_;
  ScheduledRates rates_;
  std::vector<float> scaled_gradients_;
};

// SGD keeps fast paths of its own for the common rows (one column, no
// penalty; uniform settings), so it is not a StepOptimizer.
class SgdOptimizer final : public Optimizer {
 public:
  explicit SgdOptimizer(const OptimizerOptions& options);
  const char* name() const override { return "sgd"; }
  int StateWidth(int /*weight_width*/) const override { return 0; }
  void Update(float* row, const float* gradient, int width) override;
  void UpdateRows(float* const* rows, const float* gradients, size_t count, int width,
                  float step_scale) override;

 private:
  OptimizerOptions options_;
  ColumnSettingsCache columns_;
  ScheduledRates scaled_;  // a push's column settings with a staleness scale
};

void ColumnSettingsCache::Resolve(int width) {
  auto found = by_width_.find(width);
  if (found == by_width_.end()) {
    const size_t columns = static_cast<size_t>(std::max(width, 0));
    ColumnSettings settings;
    settings.learning_rate.assign(columns, options_.learning_rate);
    settings.l1.assign(columns, options_.l1);
    settings.l2.assign(columns, options_.l2);
    settings.ftrl_beta.assign(columns, options_.ftrl_beta);
    for (const OptimizerOptions::ColumnGroup& group : options_.groups) {
      const int begin = std::max(group.begin, 0);
      const int end = std::min(group.end, width);
      for (int c = begin; c < end; ++c) {
        settings.learning_rate[c] = group.learning_rate;
        settings.l1[c] = group.l1;
        settings.l2[c] = group.l2;
        settings.ftrl_beta[c] = FtrlBetaOf(group, options_);
        settings.uniform = false;
      }
    }
    DeriveColumns(&settings);
    found = by_width_.emplace(width, std::move(settings)).first;
  }
  last_width_ = width;
  last_ = &found->second;
}

SgdOptimizer::SgdOptimizer(const OptimizerOptions& options)
    : options_(options), columns_(options), scaled_(OptimizerOptions::Schedule()) {
  ValidateOptimizerOptions(options);
}

void SgdOptimizer::Update(float* row, const float* gradient, int width) {
  UpdateRows(&row, gradient, 1, width, 1.0f);
}

void SgdOptimizer::UpdateRows(float* const* rows, const float* gradients, size_t count, int width,
                              float step_scale) {
  const ColumnSettings& columns = scaled_.For(columns_.For(width), 0.0f, step_scale);
  if (!columns.uniform || options_.l1 != 0.0f) {
    for (size_t i = 0; i < count; ++i)
      SgdColumnStep(rows[i], gradients + i * width, width, columns);
    return;
  }
  const float rate = options_.learning_rate * step_scale;
  const float decay = options_.l2;
  if (width == 1 && decay == 0.0f) {
    for (size_t i = 0; i < count; ++i) *rows[i] -= rate * gradients[i];
    return;
  }
  if (width > 64) {  // long rows: the vectorized loop pays
    for (size_t i = 0; i < count; ++i) SgdStep(rows[i], gradients + i * width, width, rate, decay);
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    float* row = rows[i];
    const float* gradient = gradients + i * width;
    for (int j = 0; j < width; ++j) row[j] -= rate * (gradient[j] + decay * row[j]);
  }
}

}  // namespace

void ValidateOptimizerOptions(const OptimizerOptions& options) {
  CheckRate(options.learning_rate, "--learning_rate");
  CheckNonNegative(options.l1, "--l1");
  CheckNonNegative(options.l2, "--wd");
  CheckDecay(options.beta1, "--beta_1");
  CheckDecay(options.beta2, "--beta_2");
  CheckDecay(options.momentum, "--momentum");
  CheckDecay(options.rmsprop_decay, "--rmsprop_decay");
  CheckPositive(options.epsilon, "--eps");
  CheckPositive(options.rescale_grad, "--rescale_grad");
  CheckNonNegative(options.clip_gradient, "--clip_gradient");
  CheckPositive(options.ftrl_beta, "--ftrl_beta");
  CheckSchedule(options.schedule);
  const bool adam = ResolveOptimizerName(options.name) == "adam";
  if (adam && options.l1 != 0) {
    throw MakeError("--l1=", options.l1,
                    ": the adam optimizer has no L1 penalty (sgd, adagrad and ftrl have)");
  }
  const auto& groups = options.groups;
  for (size_t g = 0; g < groups.size(); ++g) {
    const OptimizerOptions::ColumnGroup& group = groups[g];
    const std::string where = "optimizer column group " + std::to_string(g) + " [" +
                              std::to_string(group.begin) + ", " + std::to_string(group.end) + ")";
    if (group.begin < 0 || group.end <= group.begin) {
      throw MakeError(where, ": columns must satisfy 0 <= begin < end");
    }
    CheckRate(group.learning_rate, where + ": learning rate");
    CheckNonNegative(group.l1, where + ": l1");
    CheckNonNegative(group.l2, where + ": l2");
    CheckNonNegative(group.ftrl_beta, where + ": ftrl_beta");
    if (adam && group.l1 != 0) {
      throw MakeError(where, ": l1=", group.l1, ": the adam optimizer has no L1 penalty");
    }
    for (size_t other = 0; other < g; ++other) {
      if (group.begin < groups[other].end && groups[other].begin < group.end) {
        throw MakeError(where, " overlaps optimizer column group ", other, " [",
                        groups[other].begin, ", ", groups[other].end, ")");
      }
    }
  }
}

float StalenessStepScale(int64_t staleness) {
  if (staleness <= 1) return 1.0f;
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(staleness)));
}

std::string ResolveOptimizerName(const std::string& name) { return name == "auto" ? "adam" : name; }

bool WideVectorStepsAvailable() { return KEEL_X86_VECTORS && CpuHasAvx2(); }

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerOptions& options) {
  if (ShapesGradients(options)) {
    ValidateOptimizerOptions(options);
    OptimizerOptions unshaped = options;
    unshaped.rescale_grad = 1.0f;
    unshaped.clip_gradient = 0.0f;
    return WithGradientShaping(options, MakeOptimizer(unshaped));
  }
  const std::string name = ResolveOptimizerName(options.name);
  if (name == "sgd") {
    if (options.momentum > 0) return std::make_unique<StepOptimizer<MomentumStep>>(options);
    if (options.schedule.enabled) return std::make_unique<StepOptimizer<PlainSgdStep>>(options);
    return std::make_unique<SgdOptimizer>(options);
  }
  if (name == "adagrad") return std::make_unique<StepOptimizer<AdagradStep>>(options);
  if (name == "rmsprop") return std::make_unique<StepOptimizer<RmspropStep>>(options);
  if (name == "adam") return std::make_unique<StepOptimizer<AdamStep>>(options);
  if (name == "ftrl") {
    ValidateOptimizerOptions(options);       // the schedule too, though unused
    OptimizerOptions unscheduled = options;  // FTRL's rate decays per coordinate already
    unscheduled.schedule.enabled = false;
    return std::make_unique<StepOptimizer<FtrlStep>>(unscheduled);
  }
  throw MakeError("unknown optimizer '", options.name,
                  "' (--optimizer): expected auto, sgd, adagrad, rmsprop, adam or ftrl");
}

}  // namespace keel

#undef KEEL_STEP_INLINE
