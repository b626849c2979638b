#include "worker/hyperparameters.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "base/error.h"

namespace keel {

JobKind ParseJobKind(const std::string& name) {
  if (name == "linear_learner") return JobKind::kLinearLearner;
  if (name == "factorization_machines") return JobKind::kFactorizationMachines;
  throw MakeError("--job '", name,
                  "' is not linear_learner, factorization_machines, kv_bench or exact_sum");
}

PredictorType ParsePredictorType(const std::string& name) {
  if (name == "binary_classifier") return PredictorType::kBinaryClassifier;
  if (name == "regressor") return PredictorType::kRegressor;
  if (name == "multiclass_classifier") return PredictorType::kMulticlassClassifier;
  throw MakeError("--predictor_type '", name,
                  "' is not binary_classifier, regressor or multiclass_classifier");
}

namespace {

constexpr LossKind kEveryLoss[] = {LossKind::kLogistic,
                                   LossKind::kSquared,
                                   LossKind::kSoftmax,
                                   LossKind::kAbsolute,
                                   LossKind::kHinge,
                                   LossKind::kEpsInsensitiveSquared,
                                   LossKind::kEpsInsensitiveAbsolute,
                                   LossKind::kQuantile,
                                   LossKind::kHuber};

// The loss `auto` stands for, and the losses a predictor type accepts.
LossKind DefaultLoss(PredictorType type) {
  switch (type) {
    case PredictorType::kBinaryClassifier:
      return LossKind::kLogistic;
    case PredictorType::kRegressor:
      return LossKind::kSquared;
    case PredictorType::kMulticlassClassifier:
      return LossKind::kSoftmax;
  }
  return LossKind::kLogistic;
}

bool LossFits(PredictorType type, LossKind kind) {
  switch (kind) {
    case LossKind::kLogistic:
    case LossKind::kHinge:
      return type == PredictorType::kBinaryClassifier;
    case LossKind::kSoftmax:
      return type == PredictorType::kMulticlassClassifier;
    default:
      return type == PredictorType::kRegressor;
  }
}

std::string PredictorTypeName(PredictorType type) {
  Hyperparameters h;
  h.predictor_type = type;
  return h.PredictorName();
}

}  // namespace

std::string LossName(LossKind kind) {
  switch (kind) {
    case LossKind::kLogistic:
      return "logistic";
    case LossKind::kSquared:
      return "squared_loss";
    case LossKind::kSoftmax:
      return "softmax_loss";
    case LossKind::kAbsolute:
      return "absolute_loss";
    case LossKind::kHinge:
      return "hinge_loss";
    case LossKind::kEpsInsensitiveSquared:
      return "eps_insensitive_squared_loss";
    case LossKind::kEpsInsensitiveAbsolute:
      return "eps_insensitive_absolute_loss";
    case LossKind::kQuantile:
      return "quantile_loss";
    case LossKind::kHuber:
      return "huber_loss";
  }
  return "";
}

LossKind LossKindOf(PredictorType type, const std::string& loss) {
  if (loss == "auto") return DefaultLoss(type);
  for (const LossKind kind : kEveryLoss) {
    if (LossName(kind) != loss) continue;
    if (!LossFits(type, kind)) {
      std::string fitting;
      for (const LossKind other : kEveryLoss) {
        if (LossFits(type, other)) fitting += ", " + LossName(other);
      }
      throw MakeError("--loss ", loss, " does not fit --predictor_type ", PredictorTypeName(type),
                      " (auto", fitting, ")");
    }
    return kind;
  }
  throw MakeError("--loss '", loss,
                  "' is not auto, logistic, hinge_loss, squared_loss, absolute_loss, "
                  "eps_insensitive_squared_loss, eps_insensitive_absolute_loss, quantile_loss, "
                  "huber_loss or softmax_loss");
}

double Hyperparameters::DecisionThreshold() const {
  if (!std::isnan(threshold)) return threshold;
  return loss_function().kind == LossKind::kHinge ? 0.0 : 0.5;
}

ThresholdCriterion Hyperparameters::threshold_criterion() const {
  ThresholdCriterion criterion;
  criterion.criterion = selection_criterion;
  criterion.beta = f_beta;
  criterion.target_precision = target_precision;
  criterion.target_recall = target_recall;
  return criterion;
}

LossFunction Hyperparameters::loss_function() const {
  LossFunction function(LossKindOf(predictor_type, loss));
  function.margin = margin;
  function.quantile = quantile;
  function.insensitivity = loss_insensitivity;
  function.huber_delta = huber_delta;
  return function;
}

namespace {

// `options` with its rates times `scale`, `wd`, `l1` added to its penalties
// and ftrl's beta times `beta_scale`, the column groups' too (a group's beta
// set: 0 stands for the options').
void ApplyVariant(float scale, float wd, float l1, float beta_scale, OptimizerOptions* options) {
  options->learning_rate *= scale;
  options->l2 += wd;
  options->l1 += l1;
  for (OptimizerOptions::ColumnGroup& group : options->groups) {
    group.learning_rate *= scale;
    group.l2 += wd;
    group.l1 += l1;
    group.ftrl_beta = FtrlBetaOf(group, *options) * beta_scale;
  }
  options->ftrl_beta *= beta_scale;
}

// Model k's column groups in a row of every model's columns: its own groups
// (or one group of all its columns) moved to its columns.
void AddModelGroups(const OptimizerOptions& model, int k, int width,
                    std::vector<OptimizerOptions::ColumnGroup>* groups) {
  std::vector<OptimizerOptions::ColumnGroup> own = model.groups;
  if (own.empty()) {
    OptimizerOptions::ColumnGroup all;
    all.end = width;
    all.learning_rate = model.learning_rate;
    all.l1 = model.l1;
    all.l2 = model.l2;
    all.ftrl_beta = model.ftrl_beta;
    own.push_back(all);
  }
  for (OptimizerOptions::ColumnGroup group : own) {
    group.ftrl_beta = FtrlBetaOf(group, model);
    group.begin += k * width;
    group.end = k * width + std::min(group.end, width);
    groups->push_back(group);
  }
}

}  // namespace

Hyperparameters Hyperparameters::Model(int k) const {
  if (k < 0 || k >= num_models || static_cast<size_t>(k) >= variants.size()) {
    throw MakeError("model ", k, " of a job of ", num_models, " model(s)");
  }
  Hyperparameters model = *this;
  const ModelVariant& variant = variants[k];
  ApplyVariant(variant.learning_rate_scale, variant.wd, variant.l1, variant.ftrl_beta_scale,
               &model.weights_optimizer);
  ApplyVariant(variant.learning_rate_scale, 0, 0, variant.ftrl_beta_scale, &model.bias_optimizer);
  if (variant.factors_wd != 0.0f) {
    for (OptimizerOptions::ColumnGroup& group : model.weights_optimizer.groups) {
      if (group.begin >= 1) group.l2 += variant.factors_wd;  // a factors group (not column 0)
    }
  }
  if (variant.linear_only) model.factors_init = InitializerSpec{"constant", 0.0f, 0.0f};
  model.num_models = 1;
  model.variants = {ModelVariant{}};
  return model;
}

std::string Hyperparameters::JobName() const {
  return job == JobKind::kLinearLearner ? "linear_learner" : "factorization_machines";
}

std::string Hyperparameters::PredictorName() const {
  switch (predictor_type) {
    case PredictorType::kBinaryClassifier:
      return "binary_classifier";
    case PredictorType::kRegressor:
      return "regressor";
    case PredictorType::kMulticlassClassifier:
      return "multiclass_classifier";
  }
  return "";
}

// Validate's steps: each throws Error naming the flag.
void Hyperparameters::ValidateShape() const {
  if (job == JobKind::kFactorizationMachines &&
      predictor_type == PredictorType::kMulticlassClassifier) {
    throw MakeError(
        "--predictor_type multiclass_classifier is not available for "
        "factorization_machines (binary_classifier or regressor)");
  }
  if (predictor_type == PredictorType::kMulticlassClassifier &&
      (num_classes < 3 || num_classes > kMaxClasses)) {
    throw MakeError("--num_classes ", num_classes, " must be at least 3 for multiclass_classifier");
  }
  if (job == JobKind::kFactorizationMachines && (num_factors < 1 || num_factors > kMaxFactors)) {
    throw MakeError("--num_factors ", num_factors, " is outside 1..4096");
  }
}

void Hyperparameters::ValidateLoss() const {
  loss_function();  // the loss exists and fits the predictor type
  // Each refuses NaN and infinity too.
  if (!(std::isfinite(margin) && margin > 0)) {
    throw MakeError("--margin ", margin, " must be a positive number");
  }
  if (!(quantile > 0 && quantile < 1)) {
    throw MakeError("--quantile ", quantile, " must be between 0 and 1 (exclusive)");
  }
  if (!(std::isfinite(loss_insensitivity) && loss_insensitivity > 0)) {
    throw MakeError("--loss_insensitivity ", loss_insensitivity, " must be a positive number");
  }
  if (!(std::isfinite(huber_delta) && huber_delta > 0)) {
    throw MakeError("--huber_delta ", huber_delta, " must be a positive number");
  }
}

void Hyperparameters::ValidateTraining() const {
  // 0: auto, resolved by the worker before training (worker/auto_minibatch.h).
  if (mini_batch_size < 0) throw MakeError("--mini_batch_size must be auto or at least 1");
  if (epochs < 1) throw MakeError("--epochs must be at least 1");
  if (early_stopping_patience < 1) throw MakeError("--early_stopping_patience must be at least 1");
  if (!(f_beta > 0.0) || std::isinf(f_beta)) {
    throw MakeError("--f_beta ", f_beta, " is not a positive number");
  }
  if (accuracy_top_k < 1)
    throw MakeError("--accuracy_top_k ", accuracy_top_k, " is not at least 1");
  if (!(target_precision >= 0 && target_precision <= 1)) {
    throw MakeError("--target_precision ", target_precision, " is not in [0, 1]");
  }
  if (!(target_recall >= 0 && target_recall <= 1)) {
    throw MakeError("--target_recall ", target_recall, " is not in [0, 1]");
  }
  if (num_calibration_samples < 1) throw MakeError("--num_calibration_samples must be at least 1");
}

double Hyperparameters::FrequencyPrior(uint64_t training_rows) const {
  if (frequency_prior != "auto") return std::strtod(frequency_prior.c_str(), nullptr);
  // auto: a feature is rare when it is in fewer than kPriorRows of the
  // training rows, a count and not a share: on `keel datagen` sets of 3x10^5
  // rows the linear learner's binary, multiclass and regression models all
  // gain from a share of 0.003 over 0.001 (the binary one alike from 0.002 to
  // 0.01), while at 10^6 rows 0.003 cost ftrl 0.006-0.012 AUC at its best
  // epoch and adam its first epochs. The caps keep small sets as they were
  // tuned: the factorization machine's ftrl, slower on scaled-down features,
  // loses AUC in its 5 epochs at 0.003 (docs/BENCHMARKS.md, "Defaults").
  const double cap = job == JobKind::kFactorizationMachines ? 0.001 : 0.003;
  if (training_rows == 0) return cap;
  return std::min(cap, kPriorRows / static_cast<double>(training_rows));
}

void Hyperparameters::ValidateStatistics() const {
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string&>{"normalize_label", normalize_label},
        {"unbias_data", unbias_data},
        {"unbias_label", unbias_label}}) {
    if (value != "auto" && value != "true" && value != "false") {
      throw MakeError("--", flag, " '", value, "' is not auto, true or false");
    }
  }
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string&>{"unbias_data", unbias_data},
        {"unbias_label", unbias_label}}) {
    if (value == "true" && !use_bias) {
      throw MakeError("--", flag, " true needs --use_bias (the mean it removes returns as a bias)");
    }
  }
  if (num_point_for_scaler < 1) {
    throw MakeError("--num_point_for_scaler ", num_point_for_scaler, " is not at least 1");
  }
  if (frequency_prior != "auto") {
    char* end = nullptr;
    const double frequency = std::strtod(frequency_prior.c_str(), &end);
    if (frequency_prior.empty() || *end != '\0' || !(frequency >= 0 && frequency < 1)) {
      throw MakeError("--frequency_prior '", frequency_prior,
                      "' is not auto or a number in [0, 1) (0: off)");
    }
  }
  if (positive_example_weight_mult != "balanced") {
    char* end = nullptr;
    const double mult = std::strtod(positive_example_weight_mult.c_str(), &end);
    if (positive_example_weight_mult.empty() || *end != '\0' || !std::isfinite(mult) ||
        !(mult > 0)) {
      throw MakeError("--positive_example_weight_mult '", positive_example_weight_mult,
                      "' is not a positive number or balanced");
    }
  }
}

void Hyperparameters::ValidateModels() const {
  if (num_models < 1 || num_models > kMaxModels) {
    throw MakeError("--num_models ", num_models, " is outside 1..", kMaxModels);
  }
  if (variants.size() != static_cast<size_t>(num_models)) {
    throw MakeError(variants.size(), " model variants for --num_models ", num_models);
  }
  for (int k = 0; k < num_models; ++k) {
    const Hyperparameters model = Model(k);
    MakeOptimizer(model.weights_optimizer);
    MakeOptimizer(model.bias_optimizer);
  }
}

void Hyperparameters::Validate() const {
  ValidateShape();
  ValidateLoss();
  ValidateTraining();
  ValidateStatistics();
  ValidateModels();
}

double AutoLearningRate(const std::string& optimizer) {
  if (optimizer == "ftrl") return 1.0;
  return 0.01;
}

double AutoFtrlBeta(JobKind job) { return job == JobKind::kFactorizationMachines ? 1.0 : 0.001; }

std::map<uint32_t, TableSpec> TablesFor(const Hyperparameters& h) {
  TableSpec weights;
  weights.width = h.table_weight_width();
  weights.optimizer = h.weights_optimizer;
  std::vector<InitializerGroup> factor_columns;
  if (h.job == JobKind::kFactorizationMachines) {
    for (int k = 0; k < h.num_models; ++k) {
      const int first = k * h.weight_width();
      factor_columns.push_back(
          InitializerGroup{first + 1, first + 1 + h.num_factors, h.Model(k).factors_init});
    }
  }
  weights.initializer = MakeInitializer(h.linear_init, factor_columns, h.seed);
  weights.admit_after = h.admit_after;
  weights.admit_sketch_bytes = uint64_t{h.admit_sketch_mib} << 20;
  weights.evict_after = h.evict_after;

  TableSpec bias;
  bias.width = h.table_bias_width();
  bias.optimizer = h.bias_optimizer;
  bias.initializer = MakeInitializer(h.bias_init, {}, h.seed + 1);
  if (h.num_models > 1) {
    // Each model's columns with its own rates and penalties.
    weights.optimizer.groups.clear();
    bias.optimizer.groups.clear();
    for (int k = 0; k < h.num_models; ++k) {
      const Hyperparameters model = h.Model(k);
      AddModelGroups(model.weights_optimizer, k, h.weight_width(), &weights.optimizer.groups);
      AddModelGroups(model.bias_optimizer, k, h.bias_width(), &bias.optimizer.groups);
    }
  }

  TableSpec control;
  control.width = kControlTableWidth;
  control.optimizer.name = "sgd";
  control.optimizer.learning_rate = 1.0f;  // a push of -x adds x: the table sums
  return {{kWeightTable, std::move(weights)},
          {kBiasTable, std::move(bias)},
          {kControlTable, std::move(control)}};
}

ReaderOptions WithLabelRule(ReaderOptions reader, const Hyperparameters& hyperparameters) {
  switch (hyperparameters.predictor_type) {
    case PredictorType::kBinaryClassifier:
      reader.labels = LabelRule::kBinary;
      break;
    case PredictorType::kRegressor:
      reader.labels = LabelRule::kFinite;
      break;
    case PredictorType::kMulticlassClassifier:
      reader.labels = LabelRule::kClassId;
      break;
  }
  reader.num_classes = hyperparameters.num_classes;
  return reader;
}

}  // namespace keel
