// Evaluation metrics of the built-in models, under SageMaker's metric names.
//
// Each function takes a whole evaluation set: predictions and labels of every
// example, gathered across minibatches. They throw keel::Error, naming the
// function and the example, when the sizes disagree, the set is empty (except
// RocAuc), a label is not valid for the task, or a score is NaN where a rank
// is needed. Host only; stateless, so safe to call from several threads.
#ifndef KEEL_MODELS_METRICS_H_
#define KEEL_MODELS_METRICS_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace keel {

// Metric name -> value.
using MetricSet = std::map<std::string, double>;

// The area under the ROC curve of `scores` (any monotone score: margins or
// probabilities) against 0/1 `labels`: the probability that a random positive
// scores above a random negative, ties counting one half. Exact, by average
// ranks, in O(n log n). Returns 0.5 if either class is absent.
double RocAuc(const std::vector<float>& scores, const std::vector<float>& labels);

// The label a binary classifier gives a prediction (a probability, or a
// hinge_loss model's margin): positive when it exceeds the threshold. The
// metrics below and `keel predict`'s labels both use it, so they agree.
inline bool PredictedPositive(double prediction, double threshold) {
  return prediction > threshold;
}

// Binary classification with 0/1 `labels`. An example is predicted positive
// when its probability is > `threshold`. `beta` > 0 weighs recall against
// precision in the F-score. Keys:
//   objective_loss                  mean logistic loss (cross-entropy)
//   binary_classification_accuracy  fraction predicted correctly
//   precision                       true positives / predicted positives (0 if none predicted)
//   recall                          true positives / actual positives (0 if none)
//   binary_f_beta                   (1 + beta^2) P R / (beta^2 P + R) (0 if P = R = 0)
//   roc_auc_score                   RocAuc(probabilities, labels)
// Probabilities are clipped to [e, 1 - e], e = float epsilon, inside the loss,
// so a saturated wrong prediction adds a large but finite loss.
MetricSet BinaryClassificationMetrics(const std::vector<float>& probabilities,
                                      const std::vector<float>& labels, double threshold = 0.5,
                                      double beta = 1.0);

// Regression against real `labels`. Keys:
//   objective_loss  mean squared error (the same as mse)
//   mse             mean squared error
//   rmse            root of the mean squared error
//   absolute_loss   mean absolute error
MetricSet RegressionMetrics(const std::vector<float>& predictions,
                            const std::vector<float>& labels);

// Multiclass classification. `probabilities` holds one row of `classes`
// probabilities per example (rows x classes, row-major); each label is a class
// id in [0, classes) stored as a float. An example's predicted class is its
// most probable one, and the label's rank r (1-based) its place when the
// classes are sorted by probability, highest first; ties go to the lower
// class id in both (so r = 1 exactly when the prediction is right). `top_k`
// >= 1 (SageMaker's accuracy_top_k) and `beta` > 0 (its f_beta). Keys:
//   objective_loss             mean cross-entropy, -log p[label], clipped like the binary loss
//   multiclass_accuracy        fraction whose predicted class is the label
//   multiclass_top_k_accuracy  fraction whose label has rank r <= top_k
//   dcg                        mean of 1 / log2(1 + r): the discounted cumulative gain
//                              of the ranking with the label the one relevant class
//                              (1 when every prediction is right)
//   macro_precision            mean over classes of TP_c / predicted_c (0 if none predicted)
//   macro_recall               mean over classes of TP_c / actual_c
//   macro_f_beta               mean over classes of each class's F-beta
//                              (1 + beta^2) P_c R_c / (beta^2 P_c + R_c), 0 if P_c = R_c = 0
// The macro means run over the classes that occur as a label or a prediction
// (a class the set never mentions says nothing about the model). Throws, as
// above, also when a probability is NaN.
MetricSet MulticlassMetrics(const std::vector<float>& probabilities,
                            const std::vector<float>& labels, int classes, int top_k = 3,
                            double beta = 1.0);

// MulticlassMetrics one example at a time, for a set too large to hold whole
// (`keel predict` on a model of a million classes): memory is the per-class
// counts, three doubles a class, however many examples are added. Add the
// examples in order; Metrics() returns exactly what MulticlassMetrics returns
// for the same examples in the same order (MulticlassMetrics is this tally).
// Errors are MulticlassMetrics's, naming an example by its place in that
// order. Not safe for concurrent use.
class MulticlassTally {
 public:
  static constexpr const char* kFunction = "MulticlassMetrics";

  // Throws Error when classes < 1, top_k < 1 or beta is not a positive number.
  MulticlassTally(int classes, int top_k = 3, double beta = 1.0);

  // Counts one example: `probabilities`, `classes` floats; `label` a class id
  // stored as a float. Throws Error (counting nothing) on a label outside
  // [0, classes) or a NaN probability.
  void Add(const float* probabilities, float label);

  // The examples added so far.
  size_t examples() const { return examples_; }

  // The MulticlassMetrics keys over every example added. Throws Error when
  // none was.
  MetricSet Metrics() const;

 private:
  void CountClasses(int label, int predicted);
  // macro_precision, macro_recall and macro_f_beta over the classes that
  // occur as a label or a prediction.
  MetricSet MacroAverages() const;

  int classes_;
  int top_k_;
  double beta_;
  size_t examples_ = 0;
  double loss_ = 0.0, correct_ = 0.0, in_top_k_ = 0.0, gain_ = 0.0;
  // Per class: the confusion matrix's true positives, predictions, labels.
  std::vector<double> true_positives_, predicted_, actual_;
};

// `metrics` under SageMaker's full names, "channel:name" (validation:dcg).
MetricSet OfChannel(const std::string& channel, const MetricSet& metrics);

// "name value, name value, ..." in name order, values with 5 significant
// digits: for console lines.
std::string FormatMetrics(const MetricSet& metrics);

// One JSON object and a newline, {"name": value, ...}, in name order, values
// with 9 significant digits and null for a non-finite one: the text of
// metrics.json and oracle.json.
std::string MetricsJson(const MetricSet& metrics);

// The figures of `model` worse than the same figures of `trivial`, a constant
// predictor's on the same rows (worker/trivial_predictor.h), each as
// "objective_loss 0.7312 (a constant: 0.6931)": accuracies
// (binary_classification_accuracy, multiclass_accuracy) when lower, every
// other figure `trivial` holds (objective_loss, mse) when higher. A figure
// either lacks is not compared. Empty: no worse figure.
std::vector<std::string> WorseThanTrivial(const MetricSet& model, const MetricSet& trivial);

// The metric a progress line or a status page shows for an epoch: the first
// of `metrics` among validation:roc_auc_score, validation:multiclass_accuracy,
// validation:binary_classification_accuracy, validation:rmse,
// validation:absolute_loss, validation:objective_loss. False if none.
bool HeadlineMetric(const MetricSet& metrics, std::string* name, double* value);

}  // namespace keel

#endif  // KEEL_MODELS_METRICS_H_
