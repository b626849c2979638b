#include "models/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <iomanip>
#include <limits>
#include <numeric>
#include <sstream>

#include "models/losses.h"
#include "models/score_order.h"
// keel_models has the repository root, not src/, on its include path.
#include "base/error.h"
#include "base/json.h"

namespace keel {
namespace {

// Probabilities are kept this far from 0 and 1 inside a log.
constexpr double kProbabilityMargin = std::numeric_limits<float>::epsilon();

double ClippedLog(double probability) {
  return std::log(std::clamp(probability, kProbabilityMargin, 1.0 - kProbabilityMargin));
}

void CheckSizes(const char* function, size_t predictions, const char* prediction_name,
                size_t labels) {
  if (predictions != labels) {
    throw MakeError(function, ": ", predictions, " ", prediction_name, " but ", labels, " labels");
  }
}

void CheckNotEmpty(const char* function, size_t examples) {
  if (examples == 0) throw MakeError(function, ": no examples to evaluate");
}

// Returns whether the label is positive; throws unless it is 0 or 1.
bool IsPositive(const char* function, float label, size_t example) {
  if (label == 1.0f) return true;
  if (label == 0.0f) return false;
  throw MakeError(function, ": label ", label, " of example ", example, " is not 0 or 1");
}

void CheckBeta(const char* function, double beta) {
  if (!(beta > 0.0) || std::isinf(beta)) {
    throw MakeError(function, ": beta ", beta, " is not a positive number");
  }
}

// (1 + beta^2) P R / (beta^2 P + R), 0 when P = R = 0.
double FBeta(double precision, double recall, double beta) {
  const double beta_squared = beta * beta;
  const double denominator = beta_squared * precision + recall;
  return denominator > 0.0 ? (1.0 + beta_squared) * precision * recall / denominator : 0.0;
}

void CheckNoNaN(const char* function, const float* row, size_t width, size_t example) {
  for (size_t c = 0; c < width; ++c) {
    if (std::isnan(row[c])) {
      throw MakeError(function, ": probability of class ", c, " of example ", example,
                      " is NaN and cannot be ranked");
    }
  }
}

// The 1-based place of class `label` among `row`'s classes sorted by
// probability, highest first, ties to the lower class id.
size_t RankOf(const float* row, size_t width, int label) {
  const size_t own = static_cast<size_t>(label);
  size_t ahead = 0;
  for (size_t c = 0; c < width; ++c) {
    if (row[c] > row[own] || (row[c] == row[own] && c < own)) ++ahead;
  }
  return ahead + 1;
}

double RocAucOf(const char* function, const std::vector<float>& scores,
                const std::vector<float>& labels) {
  const size_t examples = scores.size();
  double positives = 0.0;
  for (size_t i = 0; i < examples; ++i) {
    if (IsPositive(function, labels[i], i)) positives += 1.0;
    if (std::isnan(scores[i])) {
      throw MakeError(function, ": score of example ", i, " is NaN and cannot be ranked");
    }
  }
  const double negatives = static_cast<double>(examples) - positives;
  if (positives == 0.0 || negatives == 0.0) return 0.5;

  // (score, positive) pairs sorted by score: contiguous, so the sort does not
  // chase indices into the scores.
  std::vector<ScoredExample> ranked(examples);
  for (size_t i = 0; i < examples; ++i) ranked[i] = {scores[i], labels[i] == 1.0f};
  SortByScore(&ranked);
  // Mann-Whitney: the ranks (1-based, ties sharing their average) of the
  // positives, less the smallest sum they could have, over the pair count.
  double positive_rank_sum = 0.0;
  for (size_t start = 0; start < examples;) {
    size_t end = start + 1;
    while (end < examples && ranked[end].score == ranked[start].score) ++end;
    const double average_rank = 0.5 * static_cast<double>(start + 1 + end);
    for (size_t i = start; i < end; ++i) {
      if (ranked[i].positive) positive_rank_sum += average_rank;
    }
    start = end;
  }
  return (positive_rank_sum - positives * (positives + 1.0) / 2.0) / (positives * negatives);
}

}  // namespace

double RocAuc(const std::vector<float>& scores, const std::vector<float>& labels) {
  CheckSizes("RocAuc", scores.size(), "scores", labels.size());
  return RocAucOf("RocAuc", scores, labels);
}

MetricSet BinaryClassificationMetrics(const std::vector<float>& probabilities,
                                      const std::vector<float>& labels, double threshold,
                                      double beta) {
  constexpr const char* kFunction = "BinaryClassificationMetrics";
  CheckSizes(kFunction, probabilities.size(), "probabilities", labels.size());
  CheckNotEmpty(kFunction, labels.size());
  CheckBeta(kFunction, beta);

  double loss = 0.0;
  double true_positives = 0.0, false_positives = 0.0, false_negatives = 0.0, correct = 0.0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const bool positive = IsPositive(kFunction, labels[i], i);
    const double probability = probabilities[i];
    loss -= positive ? ClippedLog(probability) : ClippedLog(1.0 - probability);
    const bool predicted_positive = PredictedPositive(probability, threshold);
    if (predicted_positive == positive) correct += 1.0;
    if (predicted_positive && positive) true_positives += 1.0;
    if (predicted_positive && !positive) false_positives += 1.0;
    if (!predicted_positive && positive) false_negatives += 1.0;
  }
  const double examples = static_cast<double>(labels.size());
  const double predicted = true_positives + false_positives;
  const double actual = true_positives + false_negatives;
  const double precision = predicted > 0.0 ? true_positives / predicted : 0.0;
  const double recall = actual > 0.0 ? true_positives / actual : 0.0;
  const double f_beta = FBeta(precision, recall, beta);

  MetricSet metrics;
  metrics["objective_loss"] = loss / examples;
  metrics["binary_classification_accuracy"] = correct / examples;
  metrics["precision"] = precision;
  metrics["recall"] = recall;
  metrics["binary_f_beta"] = f_beta;
  metrics["roc_auc_score"] = RocAucOf(kFunction, probabilities, labels);
  return metrics;
}

MetricSet RegressionMetrics(const std::vector<float>& predictions,
                            const std::vector<float>& labels) {
  constexpr const char* kFunction = "RegressionMetrics";
  CheckSizes(kFunction, predictions.size(), "predictions", labels.size());
  CheckNotEmpty(kFunction, labels.size());

  double squared_error = 0.0, absolute_error = 0.0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const double error = static_cast<double>(predictions[i]) - labels[i];
    squared_error += error * error;
    absolute_error += std::fabs(error);
  }
  const double examples = static_cast<double>(labels.size());
  const double mse = squared_error / examples;

  MetricSet metrics;
  metrics["objective_loss"] = mse;
  metrics["mse"] = mse;
  metrics["rmse"] = std::sqrt(mse);
  metrics["absolute_loss"] = absolute_error / examples;
  return metrics;
}

MulticlassTally::MulticlassTally(int classes, int top_k, double beta)
    : classes_(classes), top_k_(top_k), beta_(beta) {
  if (classes < 1) throw MakeError(kFunction, ": ", classes, " classes; need at least 1");
  if (top_k < 1) throw MakeError(kFunction, ": top_k ", top_k, " is not at least 1");
  CheckBeta(kFunction, beta);
  const size_t width = static_cast<size_t>(classes);
  true_positives_.assign(width, 0.0);
  predicted_.assign(width, 0.0);
  actual_.assign(width, 0.0);
}

void MulticlassTally::Add(const float* probabilities, float label_value) {
  const size_t example = examples_;
  const int label = LabelToClass(label_value, classes_);
  if (label < 0) {
    throw MakeError(kFunction, ": label ", label_value, " of example ", example,
                    " is not a class id in [0, ", classes_, ")");
  }
  const size_t width = static_cast<size_t>(classes_);
  CheckNoNaN(kFunction, probabilities, width, example);
  loss_ -= ClippedLog(probabilities[label]);
  const int predicted =
      static_cast<int>(std::max_element(probabilities, probabilities + width) - probabilities);
  CountClasses(label, predicted);
  const size_t rank = RankOf(probabilities, width, label);
  if (rank == 1) correct_ += 1.0;
  if (rank <= static_cast<size_t>(top_k_)) in_top_k_ += 1.0;
  gain_ += 1.0 / std::log2(1.0 + static_cast<double>(rank));
  ++examples_;
}

void MulticlassTally::CountClasses(int label, int predicted) {
  actual_[static_cast<size_t>(label)] += 1.0;
  predicted_[static_cast<size_t>(predicted)] += 1.0;
  if (label == predicted) true_positives_[static_cast<size_t>(label)] += 1.0;
}

MetricSet MulticlassTally::MacroAverages() const {
  double precision_sum = 0.0, recall_sum = 0.0, f_beta_sum = 0.0, seen = 0.0;
  for (size_t c = 0; c < actual_.size(); ++c) {
    if (actual_[c] == 0.0 && predicted_[c] == 0.0) continue;
    const double precision = predicted_[c] > 0.0 ? true_positives_[c] / predicted_[c] : 0.0;
    const double recall = actual_[c] > 0.0 ? true_positives_[c] / actual_[c] : 0.0;
    precision_sum += precision;
    recall_sum += recall;
    f_beta_sum += FBeta(precision, recall, beta_);
    seen += 1.0;
  }
  return {{"macro_precision", precision_sum / seen},
          {"macro_recall", recall_sum / seen},
          {"macro_f_beta", f_beta_sum / seen}};
}

MetricSet MulticlassTally::Metrics() const {
  CheckNotEmpty(kFunction, examples_);
  const double examples = static_cast<double>(examples_);
  MetricSet metrics = MacroAverages();
  metrics["objective_loss"] = loss_ / examples;
  metrics["multiclass_accuracy"] = correct_ / examples;
  metrics["multiclass_top_k_accuracy"] = in_top_k_ / examples;
  metrics["dcg"] = gain_ / examples;
  return metrics;
}

MetricSet MulticlassMetrics(const std::vector<float>& probabilities,
                            const std::vector<float>& labels, int classes, int top_k, double beta) {
  MulticlassTally tally(classes, top_k, beta);
  const size_t width = static_cast<size_t>(classes);
  if (probabilities.size() != labels.size() * width) {
    throw MakeError(MulticlassTally::kFunction, ": ", probabilities.size(), " probabilities but ",
                    labels.size(), " labels x ", classes, " classes");
  }
  for (size_t i = 0; i < labels.size(); ++i) tally.Add(probabilities.data() + i * width, labels[i]);
  return tally.Metrics();
}

MetricSet OfChannel(const std::string& channel, const MetricSet& metrics) {
  MetricSet named;
  for (const auto& [name, value] : metrics) named.emplace(channel + ":" + name, value);
  return named;
}

std::vector<std::string> WorseThanTrivial(const MetricSet& model, const MetricSet& trivial) {
  std::vector<std::string> worse;
  for (const auto& [name, constant] : trivial) {
    const auto found = model.find(name);
    if (found == model.end()) continue;
    const bool higher_is_better = name.find("accuracy") != std::string::npos;
    const double value = found->second;
    if (higher_is_better ? value < constant : value > constant) {
      char text[160];
      snprintf(text, sizeof(text), "%s %.4f (a constant: %.4f)", name.c_str(), value, constant);
      worse.push_back(text);
    }
  }
  return worse;
}

std::string FormatMetrics(const MetricSet& metrics) {
  std::ostringstream out;
  out << std::setprecision(5);
  bool first = true;
  for (const auto& [name, value] : metrics) {
    out << (first ? "" : ", ") << name << " " << value;
    first = false;
  }
  return out.str();
}

std::string MetricsJson(const MetricSet& metrics) {
  std::ostringstream out;
  out << std::setprecision(9) << "{";
  bool first = true;
  for (const auto& [name, value] : metrics) {
    out << (first ? "" : ", ") << JsonQuote(name) << ": ";
    if (std::isfinite(value)) {
      out << value;
    } else {
      out << "null";
    }
    first = false;
  }
  out << "}\n";
  return out.str();
}

bool HeadlineMetric(const MetricSet& metrics, std::string* name, double* value) {
  static constexpr const char* kHeadlineMetrics[] = {"validation:roc_auc_score",
                                                     "validation:multiclass_accuracy",
                                                     "validation:binary_classification_accuracy",
                                                     "validation:rmse",
                                                     "validation:absolute_loss",
                                                     "validation:objective_loss"};
  for (const char* candidate : kHeadlineMetrics) {
    auto found = metrics.find(candidate);
    if (found == metrics.end()) continue;
    *name = found->first;
    *value = found->second;
    return true;
  }
  return false;
}

}  // namespace keel
