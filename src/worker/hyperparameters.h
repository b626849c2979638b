// Hyperparameters of the built-in jobs, named as SageMaker's built-in
// algorithms name them, and the parameter tables they imply.
#ifndef KEEL_WORKER_HYPERPARAMETERS_H_
#define KEEL_WORKER_HYPERPARAMETERS_H_

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "io/readers.h"
#include "kv/initializer.h"
#include "kv/keys.h"
#include "kv/optimizer.h"
#include "kv/shared_array.h"
#include "kv/table_spec.h"
#include "models/losses.h"
#include "models/threshold_selection.h"

namespace keel {

enum class JobKind { kLinearLearner, kFactorizationMachines };
enum class PredictorType { kBinaryClassifier, kRegressor, kMulticlassClassifier };

// The one place that maps the settings to a loss: `loss` is SageMaker's name
// (auto, logistic, squared_loss, absolute_loss, hinge_loss,
// eps_insensitive_squared_loss, eps_insensitive_absolute_loss, quantile_loss,
// huber_loss, softmax_loss). auto is logistic for a binary classifier,
// squared_loss for a regressor and softmax_loss for a multiclass classifier.
// Throws Error naming both when the loss does not fit the predictor type
// (binary_classifier: logistic, hinge_loss; regressor: the six regression
// losses; multiclass_classifier: softmax_loss), or when the name is unknown.
LossKind LossKindOf(PredictorType type, const std::string& loss);

// SageMaker's name of a loss ("hinge_loss"); the inverse of LossKindOf.
std::string LossName(LossKind kind);

// Tables every training job uses on the servers.
constexpr uint32_t kWeightTable = 0;   // per feature: the weights (FM: [w, v_1..v_k])
constexpr uint32_t kBiasTable = 1;     // one key: the bias (one per class)
constexpr uint32_t kControlTable = 2;  // job-wide counters and decisions (SGD at rate 1: sums)
constexpr int kControlTableWidth = 2;  // a value in two floats (ControlTable)
// The bias's feature index (never a data index: readers reject it).
constexpr uint64_t kBiasFeature = ~uint64_t{0};
// The bias table's one key (kBiasFeature mixed), as pulls and pushes take it.
inline SharedArray<const Key> BiasKey() {
  return SharedArray<const Key>(std::vector<Key>{MixKey(kBiasFeature)});
}

// The most models a job trains side by side (SageMaker's num_models: up to 32).
constexpr int kMaxModels = 32;
// The frequency prior's auto (Hyperparameters::FrequencyPrior): a feature in
// fewer training rows than this is taken for rare.
constexpr double kPriorRows = 1000;
// The most classes of a multiclass_classifier, and factors of a factorization machine.
constexpr int kMaxClasses = 1000000;
constexpr int kMaxFactors = 4096;

// How one of the job's num_models models differs from the settings given
// (model 0 is exactly them): its weights' learning rates (every column group's
// and the bias's) times `learning_rate_scale`, `wd` and `l1` added to its
// weights' L2 and L1 penalties, `factors_wd` to its factors' L2 penalty alone,
// and ftrl's beta (its weights' and bias's) times `ftrl_beta_scale`.
// SpreadModels (model_variants.h) makes them.
struct ModelVariant {
  float learning_rate_scale = 1.0f;
  float wd = 0.0f;
  float l1 = 0.0f;
  float factors_wd = 0.0f;
  float ftrl_beta_scale = 1.0f;
  // A factorization machine's linear model: its factors start at (and so
  // stay at) zero.
  bool linear_only = false;
};

struct Hyperparameters {
  JobKind job = JobKind::kLinearLearner;
  PredictorType predictor_type = PredictorType::kBinaryClassifier;
  int num_classes = 2;       // multiclass_classifier only
  int num_factors = 8;       // factorization_machines only
  uint64_t feature_dim = 0;  // 0: indices are not checked
  // 0 in the flags' hyperparameters: auto, until the worker resolves it.
  int mini_batch_size = 1000;
  int epochs = 15;  // the job flags give a factorization machine 5
  bool use_bias = true;
  uint64_t seed = 1;
  int early_stopping_patience = 3;
  // The loss (SageMaker's name, "auto" resolved by LossKindOf) and its
  // parameters, SageMaker's defaults; each is read only by its own loss.
  std::string loss = "auto";
  float margin = 1.0f;               // hinge_loss: > 0
  float quantile = 0.5f;             // quantile_loss: in (0, 1)
  float loss_insensitivity = 0.01f;  // eps_insensitive_*: > 0
  float huber_delta = 1.0f;          // huber_loss: > 0
  double early_stopping_tolerance = 0.001;
  double f_beta = 1.0;     // beta of the F-score metrics
  int accuracy_top_k = 3;  // k of multiclass_top_k_accuracy
  // A binary classifier's decision threshold: an example is labelled 1 when
  // its score is at least this. NaN: the loss's default (DecisionThreshold).
  double threshold = std::numeric_limits<double>::quiet_NaN();
  // How a linear learner binary classifier's threshold is tuned at the end of
  // the job, and models are compared (SageMaker's names and defaults):
  // binary_classifier_model_selection_criteria, target_precision and
  // target_recall (in [0, 1]), and num_calibration_samples, the most rows the
  // threshold is tuned on (>= 1).
  SelectionCriterion selection_criterion = SelectionCriterion::kAccuracy;
  double target_precision = 0.8;
  double target_recall = 0.8;
  uint64_t num_calibration_samples = 10000000;
  // Statistics taken before training (worker/data_statistics.h), SageMaker's
  // names and defaults; the tri-state ones are "auto", "true" or "false".
  bool normalize_data = true;
  std::string normalize_label = "auto";  // auto: on for a regressor
  std::string unbias_data = "auto";      // auto: features in most rows, when normalising
  std::string unbias_label = "auto";     // auto: on when normalize_label is
  int num_point_for_scaler = 100000;     // rows of the sample (SageMaker's default: 10000)
  // A Keel extra: a feature not centred and present in a share p of the
  // sample's rows below this frequency F has its values scaled by p / F (a
  // prior that a rarely seen feature's weight is small), folded into the model
  // like the other statistics. "auto" (kPriorRows over the training rows, at
  // most 0.003 for the linear learner and 0.001 for the factorization
  // machine), "0" (off), or a number in (0, 1).
  std::string frequency_prior = "auto";
  // Whether a factorization machine on ftrl trains SpreadModels' fast-beta
  // models: --ftrl_beta auto (an explicit beta is every model's).
  bool fast_beta_models = true;
  // frequency_prior as a number (0: off), for a training channel of about
  // `training_rows` rows (0: not known, as for a pipe: auto is then its cap).
  double FrequencyPrior(uint64_t training_rows = 0) const;
  // A binary classifier's positive examples weigh this (a positive number),
  // or "balanced": negatives over positives in the sample.
  std::string positive_example_weight_mult = "1.0";
  bool balance_multiclass_weights = false;
  // The weights table's key admission and eviction (kv/table_spec.h): a
  // feature gets a row after admit_after pushes (0: at once), counted in
  // admit_sketch_mib MiB per table and key range; rows not pushed in the last
  // evict_after clocks are dropped (0: never).
  uint32_t admit_after = 0;
  uint32_t admit_sketch_mib = 8;
  uint32_t evict_after = 0;
  // How the servers update each table, and how they create its rows.
  OptimizerOptions weights_optimizer;
  OptimizerOptions bias_optimizer;
  InitializerSpec linear_init;   // linear weights (FM column 0; every column of the linear learner)
  InitializerSpec factors_init;  // FM columns 1..k
  InitializerSpec bias_init;
  // SageMaker's num_models: models trained side by side in one pass over the
  // data, one per variant (variants.size() == num_models, variants[0] the
  // settings given). Their rows sit side by side in the tables: model k's
  // weights are columns [k * weight_width(), (k + 1) * weight_width()) of a
  // weight row, its bias columns [k * bias_width(), ...) of the bias row.
  int num_models = 1;
  std::vector<ModelVariant> variants = {ModelVariant{}};

  // Scores per example: num_classes for multiclass, else 1.
  int classes() const {
    return predictor_type == PredictorType::kMulticlassClassifier ? num_classes : 1;
  }
  // Floats per feature of one model.
  int weight_width() const {
    return job == JobKind::kFactorizationMachines ? 1 + num_factors : classes();
  }
  // Floats of one model's bias.
  int bias_width() const { return job == JobKind::kFactorizationMachines ? 1 : classes(); }
  // Floats per key in the weight and bias tables: every model's.
  int table_weight_width() const { return num_models * weight_width(); }
  int table_bias_width() const { return num_models * bias_width(); }
  // Model k alone (0 <= k < num_models): num_models 1, its variant applied to
  // the optimizers' rates and penalties. What the artifact of model k records.
  Hyperparameters Model(int k) const;
  // The loss training minimises, with its parameters (LossKindOf; throws
  // Error as it does).
  LossFunction loss_function() const;
  // `threshold`, or when it is NaN the loss's default: 0 for hinge_loss
  // (whose scores are margins), 0.5 for the others (probabilities).
  double DecisionThreshold() const;
  // The selection criterion with its parameters (beta is f_beta).
  ThresholdCriterion threshold_criterion() const;
  std::string JobName() const;
  std::string PredictorName() const;
  // Throws Error naming the flag if a value is out of range.
  void Validate() const;

 private:
  // Validate's steps: the job's shape (predictor type, classes, factors), the
  // loss and its parameters, the training settings (minibatch, epochs,
  // stopping, metrics, selection), the data statistics and class weights,
  // and every model's optimizers.
  void ValidateShape() const;
  void ValidateLoss() const;
  void ValidateTraining() const;
  void ValidateStatistics() const;
  void ValidateModels() const;
};

JobKind ParseJobKind(const std::string& name);  // linear_learner | factorization_machines
PredictorType ParsePredictorType(
    const std::string& name);  // binary_classifier | regressor | multiclass_classifier

// What --learning_rate=auto stands for under `optimizer` (a resolved name,
// ResolveOptimizerName), whatever the job: 1 for ftrl (FTRL's alpha; on
// dense data a factorization machine's factors diverge at 10, which
// configs/factorization_machines.flags keeps for its sparse data), 0.01 for
// every other optimizer (Keel's default rate before `auto`).
// docs/ARCHITECTURE.md ("Training jobs") says why.
double AutoLearningRate(const std::string& optimizer);

// What --ftrl_beta=auto stands for under `job`: FTRL's beta in the units of
// the gradients servers take, minibatch means. McMahan et al.'s beta of 1 is
// for one example's gradient; over a mean of 1,000 examples a feature's
// gradient is about a thousandth of that, so a beta of 1 outweighs sqrt(n)
// for all but the most frequent features and FTRL becomes a fixed-rate step
// that moves rare features a thousand times too slowly. The linear learner
// takes 0.001, a beta of 1 per example at 1,000 examples a minibatch (auto's
// cap; a smaller minibatch makes it a smaller beta per example). The
// factorization machine keeps 1: that slowness is what keeps the factors of
// rare features near zero, and a smaller beta overfits them on smaller sets
// (docs/BENCHMARKS.md, "ftrl's beta on minibatch means").
double AutoFtrlBeta(JobKind job);

// The servers' table specs for a job: widths, optimizers, initializers.
std::map<uint32_t, TableSpec> TablesFor(const Hyperparameters& hyperparameters);

// `reader` with the label rule of the predictor type (binary: 0/1 or -1/+1;
// multiclass: class ids below num_classes; regression: any finite number), so
// that every channel's labels are checked as they are read.
ReaderOptions WithLabelRule(ReaderOptions reader, const Hyperparameters& hyperparameters);

}  // namespace keel

#endif  // KEEL_WORKER_HYPERPARAMETERS_H_
