#include "kv/optimizer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <type_traits>

#include "base/error.h"
#include "kv/gradient_shaping.h"

namespace keel {
namespace {

// Moves `weight` towards zero by `threshold`, to exactly zero if it would
// cross it. A threshold of zero leaves the weight as it is (NaN included).
inline float SoftThreshold(float weight, float threshold) {
  return std::fabs(weight) <= threshold && threshold > 0.0f
             ? 0.0f
             : weight - std::copysign(threshold, weight);
}

void CheckPositive(float value, const std::string& what) {
  if (!std::isfinite(value) || value <= 0) {
    throw MakeError(what, "=", value, ": must be a positive finite number");
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
inline void SgdStep(float* __restrict row, const float* __restrict gradient, int width, float rate,
                    float decay) {
  if (decay == 0.0f) {
    for (int i = 0; i < width; ++i) row[i] -= rate * gradient[i];
  } else {
    for (int i = 0; i < width; ++i) row[i] -= rate * (gradient[i] + decay * row[i]);
  }
}

// SGD on one coordinate with its own rate and penalties.
inline float SgdCoordinate(float w, float g, float rate, float l1, float l2) {
  return SoftThreshold(w - rate * (g + l2 * w), rate * l1);
}

// SGD with each column's own rate and penalties.
inline void SgdColumnStep(float* __restrict row, const float* __restrict gradient, int width,
                          const ColumnSettings& columns) {
  const float* rate = columns.learning_rate.data();
  const float* l1 = columns.l1.data();
  const float* l2 = columns.l2.data();
  for (int i = 0; i < width; ++i)
    row[i] = SgdCoordinate(row[i], gradient[i], rate[i], l1[i], l2[i]);
}

// Rows of at most this many weights step across rows, in blocks of up to
// kBlockLanes rows (StepOptimizer): a shorter column loop vectorizes poorly,
// and transposing a block costs little beside the step.
constexpr int kMaxBlockWidth = 16;
constexpr size_t kBlockLanes = 32;

// The step rules of MakeOptimizer's formulas (optimizer.h), one per optimizer
// but SGD. A step has the optimizer's name, its state width, a constructor
// taking the options, and two ways to apply gradients, with one formula for a
// coordinate (Coordinate) that both call:
// - operator(): one gradient to one row, column by column, each column with
//   its own settings;
// - Block: one gradient each to the rows of a block, transposed (below),
//   lane by lane: the compiler vectorizes across rows, so narrow rows (a
//   column loop too short to vectorize) step side by side.
// StepOptimizer makes a step an Optimizer.
//
// A transposed block holds `lanes` rows as columns of `stride` floats: float
// c of row l at block[c * stride + l] (the gradients likewise). Both ways run
// the same float operations in the same order on each coordinate, so they
// give the same bits (optimizer.cc is built without contraction into fused
// multiply-adds and without math errno, CMakeLists.txt).

// Row layout: weights only. SGD's StepOptimizer form, for rows that carry a
// schedule's count (SgdOptimizer below serves plain SGD).
struct PlainSgdStep {
  static constexpr const char* kName = "sgd";
  static constexpr bool kScalesGradient = false;
  static int StateWidth(int /*weight_width*/) { return 0; }
  explicit PlainSgdStep(const OptimizerOptions& /*options*/) {}

  void operator()(float* __restrict row, const float* __restrict gradient, int width,
                  const ColumnSettings& columns) const {
    SgdColumnStep(row, gradient, width, columns);
  }
  void Block(float* __restrict block, const float* __restrict gradients, size_t lanes,
             size_t stride, int width, const ColumnSettings& columns) const {
    for (int c = 0; c < width; ++c) {
      float* __restrict w = block + c * stride;
      const float* __restrict g = gradients + c * stride;
      const float rate = columns.learning_rate[c], l1 = columns.l1[c], l2 = columns.l2[c];
      for (size_t l = 0; l < lanes; ++l) w[l] = SgdCoordinate(w[l], g[l], rate, l1, l2);
    }
  }
};

// Steps whose rows hold the weights, then Rule::kStates floats of state per
// weight (all the first ones, then all the second ones), which `Rule` steps
// together: rule(w, state..., g, rate, l1, l2) for one coordinate.
template <typename Rule>
struct PerWeightStep {
  static constexpr const char* kName = Rule::kName;
  static constexpr bool kScalesGradient = Rule::kScalesGradient;
  static int StateWidth(int weight_width) { return Rule::kStates * weight_width; }
  explicit PerWeightStep(const OptimizerOptions& options) : rule_(options) {}

  // A copy of the rule in each loop: its settings cannot alias the rows.
  void operator()(float* __restrict row, const float* __restrict gradient, int width,
                  const ColumnSettings& columns) const {
    const Rule rule = rule_;
    float* __restrict first = row + width;
    float* __restrict second = first + (Rule::kStates == 2 ? width : 0);
    const float* rate = columns.learning_rate.data();
    const float* l1 = columns.l1.data();
    const float* l2 = columns.l2.data();
    // Through locals: the compiler then vectorizes the columns.
    for (int i = 0; i < width; ++i) {
      float w = row[i], state = first[i];
      if constexpr (Rule::kStates == 1) {
        rule(w, state, gradient[i], rate[i], l1[i], l2[i]);
      } else {
        float more = second[i];
        rule(w, state, more, gradient[i], rate[i], l1[i], l2[i]);
        second[i] = more;
      }
      row[i] = w;
      first[i] = state;
    }
  }
  void Block(float* __restrict block, const float* __restrict gradients, size_t lanes,
             size_t stride, int width, const ColumnSettings& columns) const {
    const Rule rule = rule_;
    for (int c = 0; c < width; ++c) {
      float* __restrict w = block + c * stride;
      float* __restrict first = block + (width + c) * stride;
      float* __restrict second = first + (Rule::kStates == 2 ? width * stride : 0);
      const float* __restrict g = gradients + c * stride;
      const float rate = columns.learning_rate[c], l1 = columns.l1[c], l2 = columns.l2[c];
      for (size_t l = 0; l < lanes; ++l) {
        if constexpr (Rule::kStates == 1) {
          rule(w[l], first[l], g[l], rate, l1, l2);
        } else {
          rule(w[l], first[l], second[l], g[l], rate, l1, l2);
        }
      }
    }
  }

  Rule rule_;
};

// What the rules of one state per weight share: their step sizes scale.
struct OneStateRule {
  static constexpr bool kScalesGradient = false;
  static constexpr int kStates = 1;
};

// SGD with momentum; the state is the velocity.
struct MomentumRule : OneStateRule {
  static constexpr const char* kName = "sgd";
  explicit MomentumRule(const OptimizerOptions& options) : momentum(options.momentum) {}
  void operator()(float& w, float& velocity, float g, float rate, float l1, float l2) const {
    velocity = momentum * velocity - rate * (g + l2 * w);
    w = SoftThreshold(w + velocity, rate * l1);
  }
  float momentum;
};

// Adagrad; the state is the sum of squared gradients.
struct AdagradRule : OneStateRule {
  static constexpr const char* kName = "adagrad";
  explicit AdagradRule(const OptimizerOptions& options) : epsilon(options.epsilon) {}
  void operator()(float& w, float& sum, float g_in, float rate, float l1, float l2) const {
    const float g = g_in + l2 * w;
    sum += g * g;
    const float step = rate / (std::sqrt(sum) + epsilon);
    w = SoftThreshold(w - step * g, step * l1);
  }
  float epsilon;
};

// RMSProp; the state is the decaying mean square.
struct RmspropRule : OneStateRule {
  static constexpr const char* kName = "rmsprop";
  explicit RmspropRule(const OptimizerOptions& options)
      : decay(options.rmsprop_decay), epsilon(options.epsilon) {}
  void operator()(float& w, float& mean_square, float g_in, float rate, float l1, float l2) const {
    const float g = g_in + l2 * w;
    mean_square = decay * mean_square + (1.0f - decay) * g * g;
    const float step = rate / (std::sqrt(mean_square) + epsilon);
    w = SoftThreshold(w - step * g, step * l1);
  }
  float decay, epsilon;
};

using MomentumStep = PerWeightStep<MomentumRule>;
using AdagradStep = PerWeightStep<AdagradRule>;
using RmspropStep = PerWeightStep<RmspropRule>;

// Row layout: weights, first moments, second moments, step count.
struct AdamStep {
  static constexpr const char* kName = "adam";
  static constexpr bool kScalesGradient = false;
  static int StateWidth(int weight_width) { return 2 * weight_width + 1; }
  explicit AdamStep(const OptimizerOptions& options)
      : beta1_(options.beta1), beta2_(options.beta2), epsilon_(options.epsilon) {}

  // A row's two bias corrections.
  struct Corrections {
    float first, second;
  };
  // Counts a row's step (`steps`, exact up to 2^24; past that, the bias
  // correction is 1 anyway) and returns its corrections.
  Corrections Count(float& steps) const {
    steps += 1.0f;
    return {static_cast<float>(1.0 / (1.0 - std::pow(double{beta1_}, steps))),
            static_cast<float>(1.0 / (1.0 - std::pow(double{beta2_}, steps)))};
  }
  static void Coordinate(float& w, float& first_moment, float& second_moment, float g_in,
                         float rate, float l2, float first_correction, float second_correction,
                         float beta1, float beta2, float epsilon) {
    const float g = g_in + l2 * w;
    first_moment = beta1 * first_moment + (1.0f - beta1) * g;
    second_moment = beta2 * second_moment + (1.0f - beta2) * g * g;
    w -= rate * (first_moment * first_correction) /
         (std::sqrt(second_moment * second_correction) + epsilon);
  }
  void operator()(float* __restrict row, const float* __restrict gradient, int width,
                  const ColumnSettings& columns) const {
    const float beta1 = beta1_, beta2 = beta2_, epsilon = epsilon_;
    float* __restrict first_moment = row + width;
    float* __restrict second_moment = first_moment + width;
    const Corrections corrections = Count(second_moment[width]);
    const float first_correction = corrections.first, second_correction = corrections.second;
    const float* rate = columns.learning_rate.data();
    const float* l2 = columns.l2.data();
    // Through locals: the compiler then vectorizes the columns.
    for (int i = 0; i < width; ++i) {
      float w = row[i], m = first_moment[i], v = second_moment[i];
      Coordinate(w, m, v, gradient[i], rate[i], l2[i], first_correction, second_correction, beta1,
                 beta2, epsilon);
      row[i] = w;
      first_moment[i] = m;
      second_moment[i] = v;
    }
  }
  void Block(float* __restrict block, const float* __restrict gradients, size_t lanes,
             size_t stride, int width, const ColumnSettings& columns) const {
    const float beta1 = beta1_, beta2 = beta2_, epsilon = epsilon_;
    // Each row's corrections: its own step count (the column after the moments).
    float* steps = block + static_cast<size_t>(3 * width) * stride;
    float first_corrections[kBlockLanes], second_corrections[kBlockLanes];
    for (size_t l = 0; l < lanes; ++l) {
      const Corrections corrections = Count(steps[l]);
      first_corrections[l] = corrections.first;
      second_corrections[l] = corrections.second;
    }
    for (int c = 0; c < width; ++c) {
      float* __restrict w = block + c * stride;
      float* __restrict first_moment = block + (width + c) * stride;
      float* __restrict second_moment = block + (2 * width + c) * stride;
      const float* __restrict g = gradients + c * stride;
      const float rate = columns.learning_rate[c], l2 = columns.l2[c];
      for (size_t l = 0; l < lanes; ++l) {
        Coordinate(w[l], first_moment[l], second_moment[l], g[l], rate, l2, first_corrections[l],
                   second_corrections[l], beta1, beta2, epsilon);
      }
    }
  }

  float beta1_, beta2_, epsilon_;
};

// FTRL-proximal; the states are z, then n.
struct FtrlRule {
  static constexpr const char* kName = "ftrl";
  // Its rate is not a step size: a staleness scale weighs the gradient.
  static constexpr bool kScalesGradient = true;
  static constexpr int kStates = 2;
  explicit FtrlRule(const OptimizerOptions& options) : beta(options.ftrl_beta) {}

  // Branch-free (selections compute both sides, & rather than &&), so the
  // compiler vectorizes the loops that call it.
  void operator()(float& w, float& z, float& n, float g, float alpha, float l1, float l2) const {
    // First update of an initialized weight: start z where the closed form
    // below gives that weight back, so FTRL starts from the initializer's
    // value (a factorization machine's factors must not all start at 0).
    const float first_z = -w * (beta / alpha + l2) - std::copysign(l1, w);
    const bool fresh = (n == 0.0f) & (w != 0.0f);
    const float z0 = fresh ? first_z : z;
    const float old_root = std::sqrt(n);
    const float n1 = n + g * g;
    const float new_root = std::sqrt(n1);
    const float sigma = (new_root - old_root) / alpha;
    const float z1 = z0 + (g - sigma * w);
    const float shrunk = -(z1 - std::copysign(l1, z1)) / ((beta + new_root) / alpha + l2);
    w = std::fabs(z1) <= l1 ? 0.0f : shrunk;
    z = z1;
    n = n1;
  }
  float beta;
};

using FtrlStep = PerWeightStep<FtrlRule>;

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
// applies `Step` (inlined: the loops are the server's hot path), across the
// rows of a batch in blocks when they are narrow and share their settings,
// else row by row. Under a schedule, the row's update count follows the
// step's state.
template <typename Step>
class StepOptimizer final : public Optimizer {
 public:
  explicit StepOptimizer(const OptimizerOptions& options)
      : step_(options),
        scheduled_(options.schedule.enabled),
        columns_(options),
        rates_(options.schedule) {
    ValidateOptimizerOptions(options);
  }
  const char* name() const override { return Step::kName; }
  int StateWidth(int weight_width) const override {
    return Step::StateWidth(weight_width) + (scheduled_ ? 1 : 0);
  }
  // One row at a time, column by column: UpdateRows's blocks give the same bits.
  void Update(float* row, const float* gradient, int width) override {
    UpdateEachRow(&row, gradient, 1, width, 1.0f);
  }
  void UpdateRows(float* const* rows, const float* gradients, size_t count, int width,
                  float step_scale) override {
    if (scheduled_ || width > kMaxBlockWidth || count < 2) {
      return UpdateEachRow(rows, gradients, count, width, step_scale);
    }
    if (Step::kScalesGradient && step_scale != 1.0f) {
      gradients = ScaledGradients(gradients, count * static_cast<size_t>(width), step_scale);
      step_scale = 1.0f;
    }
    // Without a schedule every row of the push takes the same settings.
    UpdateInBlocks(rows, gradients, count, width,
                   rates_.For(columns_.For(width), 0.0f, step_scale));
  }

 private:
  void UpdateEachRow(float* const* rows, const float* gradients, size_t count, int width,
                     float step_scale) {
    if (Step::kScalesGradient && step_scale != 1.0f) {
      gradients = ScaledGradients(gradients, count * static_cast<size_t>(width), step_scale);
      step_scale = 1.0f;
    }
    const ColumnSettings& columns = columns_.For(width);
    if (!scheduled_ && step_scale == 1.0f) {
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

  // Rows without a schedule's count, kBlockLanes at a time: each block
  // transposed (see Block above), stepped, and written back.
  void UpdateInBlocks(float* const* rows, const float* gradients, size_t count, int width,
                      const ColumnSettings& settings) {
    const size_t weights = static_cast<size_t>(width);
    const size_t row_width = weights + static_cast<size_t>(Step::StateWidth(width));
    block_.resize(row_width * kBlockLanes);
    gradient_block_.resize(weights * kBlockLanes);
    float* block = block_.data();
    float* gradient_block = gradient_block_.data();
    for (size_t begin = 0; begin < count; begin += kBlockLanes) {
      const size_t lanes = std::min(kBlockLanes, count - begin);
      float* const* part = rows + begin;
      const float* part_gradients = gradients + begin * weights;
      for (size_t l = 0; l < lanes; ++l) {
        const float* row = part[l];
        for (size_t c = 0; c < row_width; ++c) block[c * kBlockLanes + l] = row[c];
        for (size_t c = 0; c < weights; ++c) {
          gradient_block[c * kBlockLanes + l] = part_gradients[l * weights + c];
        }
      }
      step_.Block(block, gradient_block, lanes, kBlockLanes, width, settings);
      for (size_t l = 0; l < lanes; ++l) {
        float* row = part[l];
        for (size_t c = 0; c < row_width; ++c) row[c] = block[c * kBlockLanes + l];
      }
    }
  }

  // `gradients` times `scale`, in a buffer reused across pushes.
  const float* ScaledGradients(const float* gradients, size_t size, float scale) {
    scaled_gradients_.resize(size);
    for (size_t i = 0; i < size; ++i) scaled_gradients_[i] = gradients[i] * scale;
    return scaled_gradients_.data();
  }

  const Step step_;
  const bool scheduled_;
  ColumnSettingsCache columns_;
  ScheduledRates rates_;
  std::vector<float> scaled_gradients_;
  std::vector<float> block_, gradient_block_;  // UpdateInBlocks's transposed rows
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
    for (const OptimizerOptions::ColumnGroup& group : options_.groups) {
      const int begin = std::max(group.begin, 0);
      const int end = std::min(group.end, width);
      for (int c = begin; c < end; ++c) {
        settings.learning_rate[c] = group.learning_rate;
        settings.l1[c] = group.l1;
        settings.l2[c] = group.l2;
        settings.uniform = false;
      }
    }
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
  CheckPositive(options.learning_rate, "--learning_rate");
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
    CheckPositive(group.learning_rate, where + ": learning rate");
    CheckNonNegative(group.l1, where + ": l1");
    CheckNonNegative(group.l2, where + ": l2");
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
