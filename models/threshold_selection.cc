#include "models/threshold_selection.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <tuple>

#include "models/score_order.h"
// keel_models has the repository root, not src/, on its include path.
#include "base/error.h"

namespace keel {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// One way to split the set: the examples predicted above `low` are positive.
// Every threshold in [low, high) gives it (low = -inf: all positive; high =
// +inf: none).
struct Split {
  uint64_t true_positives = 0;
  uint64_t false_positives = 0;
  double low = 0.0;
  double high = kInfinity;
};

// The figures of a split under a criterion: `objective` is what is
// maximised, `constrained` what must reach the target (0 without a target).
struct Figures {
  bool feasible = true;
  double objective = 0.0;
  double constrained = 0.0;
};

// The examples, checked, highest prediction first.
std::vector<ScoredExample> SortedExamples(const std::vector<float>& predictions,
                                          const std::vector<float>& labels) {
  if (predictions.size() != labels.size()) {
    throw MakeError("ChooseThreshold: ", predictions.size(), " predictions but ", labels.size(),
                    " labels");
  }
  if (labels.empty()) throw MakeError("ChooseThreshold: no examples");
  std::vector<ScoredExample> examples(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] != 0.0f && labels[i] != 1.0f) {
      throw MakeError("ChooseThreshold: example ", i, " has label ", labels[i], ", not 0 or 1");
    }
    if (std::isnan(predictions[i])) {
      throw MakeError("ChooseThreshold: example ", i, " has a NaN prediction");
    }
    examples[i] = {predictions[i], labels[i] == 1.0f};
  }
  SortByScore(&examples, /*descending=*/true);
  return examples;
}

class SplitJudge {
 public:
  SplitJudge(const ThresholdCriterion& criterion, uint64_t positives, uint64_t examples)
      : criterion_(criterion), positives_(positives), negatives_(examples - positives) {}

  Figures Judge(const Split& split) const {
    const double tp = static_cast<double>(split.true_positives);
    const double fp = static_cast<double>(split.false_positives);
    const double fn = static_cast<double>(positives_) - tp;
    const double predicted = tp + fp;
    const double precision = predicted > 0 ? tp / predicted : 0.0;
    const double recall = positives_ > 0 ? tp / static_cast<double>(positives_) : 0.0;
    switch (criterion_.criterion) {
      case SelectionCriterion::kAccuracy:
        return {true, (tp + static_cast<double>(negatives_) - fp) /
                          static_cast<double>(positives_ + negatives_)};
      case SelectionCriterion::kFBeta: {
        const double b2 = criterion_.beta * criterion_.beta;
        const double f = tp > 0 ? (1 + b2) * tp / ((1 + b2) * tp + b2 * fn + fp) : 0.0;
        return {true, f};
      }
      case SelectionCriterion::kPrecisionAtTargetRecall:
        return {recall >= criterion_.target_recall, precision, recall};
      case SelectionCriterion::kRecallAtTargetPrecision:
        return {precision >= criterion_.target_precision, recall, precision};
      case SelectionCriterion::kLossFunction:
        break;
    }
    return {};
  }

 private:
  const ThresholdCriterion criterion_;
  const uint64_t positives_;
  const uint64_t negatives_;
};

bool Contains(const Split& split, double threshold) {
  return split.low <= threshold && threshold < split.high;
}

// How far `threshold` lies from the thresholds that give `split`: 0 inside,
// above 0 outside (`high` itself is outside).
double Distance(const Split& split, double threshold) {
  if (Contains(split, threshold)) return 0.0;
  if (threshold < split.low) return split.low - threshold;
  return std::max(threshold - split.high, std::numeric_limits<double>::denorm_min());
}

// The threshold returned for `split` (see ChooseThreshold's contract).
double ThresholdOf(const Split& split, double default_threshold) {
  if (Contains(split, default_threshold)) return default_threshold;
  if (split.high == kInfinity) return split.low;
  if (split.low == -kInfinity) return std::nextafter(split.high, -kInfinity);
  return split.low + (split.high - split.low) / 2;
}

// Keeps the best split seen: feasible ones by (objective, constrained), the
// others by (constrained, objective), ties to the one nearest the default.
class BestSplit {
 public:
  explicit BestSplit(double default_threshold) : default_threshold_(default_threshold) {}

  void Consider(const Split& split, const Figures& figures) {
    const auto key = figures.feasible ? std::make_tuple(figures.objective, figures.constrained,
                                                        -Distance(split, default_threshold_))
                                      : std::make_tuple(figures.constrained, figures.objective,
                                                        -Distance(split, default_threshold_));
    Candidate& best = figures.feasible ? feasible_ : closest_;
    if (!best.seen || key > best.key) best = {true, key, split, figures};
  }

  ThresholdChoice Choice() const {
    const Candidate& best = feasible_.seen ? feasible_ : closest_;
    ThresholdChoice choice;
    choice.threshold = ThresholdOf(best.split, default_threshold_);
    choice.target_met = feasible_.seen;
    choice.value = feasible_.seen ? best.figures.objective : 0.0;
    return choice;
  }

 private:
  struct Candidate {
    bool seen = false;
    std::tuple<double, double, double> key;
    Split split;
    Figures figures;
  };
  const double default_threshold_;
  Candidate feasible_;
  Candidate closest_;
};

}  // namespace

SelectionCriterion ParseSelectionCriterion(const std::string& name) {
  for (SelectionCriterion criterion :
       {SelectionCriterion::kAccuracy, SelectionCriterion::kFBeta,
        SelectionCriterion::kPrecisionAtTargetRecall, SelectionCriterion::kRecallAtTargetPrecision,
        SelectionCriterion::kLossFunction}) {
    if (name == SelectionCriterionName(criterion)) return criterion;
  }
  throw MakeError("--binary_classifier_model_selection_criteria '", name,
                  "' is not accuracy, f_beta, precision_at_target_recall, "
                  "recall_at_target_precision or loss_function");
}

std::string SelectionCriterionName(SelectionCriterion criterion) {
  switch (criterion) {
    case SelectionCriterion::kAccuracy:
      return "accuracy";
    case SelectionCriterion::kFBeta:
      return "f_beta";
    case SelectionCriterion::kPrecisionAtTargetRecall:
      return "precision_at_target_recall";
    case SelectionCriterion::kRecallAtTargetPrecision:
      return "recall_at_target_precision";
    case SelectionCriterion::kLossFunction:
      return "loss_function";
  }
  return "";
}

ThresholdChoice ChooseThreshold(const std::vector<float>& predictions,
                                const std::vector<float>& labels,
                                const ThresholdCriterion& criterion, double default_threshold) {
  const std::vector<ScoredExample> examples = SortedExamples(predictions, labels);
  if (criterion.criterion == SelectionCriterion::kLossFunction) {
    return {default_threshold, std::numeric_limits<double>::quiet_NaN(), true};
  }
  const uint64_t positives = static_cast<uint64_t>(std::count_if(
      examples.begin(), examples.end(), [](const ScoredExample& e) { return e.positive; }));
  const SplitJudge judge(criterion, positives, examples.size());
  BestSplit best(default_threshold);
  // None positive first; then, one distinct prediction at a time, those at or
  // above it.
  Split split;
  split.low = examples.front().score;
  best.Consider(split, judge.Judge(split));
  for (size_t i = 0; i < examples.size();) {
    const float prediction = examples[i].score;
    for (; i < examples.size() && examples[i].score == prediction; ++i) {
      ++(examples[i].positive ? split.true_positives : split.false_positives);
    }
    split.high = prediction;
    split.low = i < examples.size() ? examples[i].score : -kInfinity;
    best.Consider(split, judge.Judge(split));
  }
  return best.Choice();
}

}  // namespace keel
