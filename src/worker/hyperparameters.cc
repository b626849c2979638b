#include "worker/hyperparameters.h"

#include <cmath>
#include <cstdlib>
#include <utility>

#include "base/error.h"

namespace keel {

JobKind ParseJobKind(const std::string& name) {
  if (name == "linear_learner") return JobKind::kLinearLearner;
  if (name == "factorization_machines") return JobKind::kFactorizationMachines;
  throw MakeError("--job '", name, "' is not linear_learner, factorization_machines or kv_bench");
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

LossFunction Hyperparameters::loss_function() const {
  LossFunction function(LossKindOf(predictor_type, loss));
  function.margin = margin;
  function.quantile = quantile;
  function.insensitivity = loss_insensitivity;
  function.huber_delta = huber_delta;
  return function;
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

void Hyperparameters::Validate() const {
  if (job == JobKind::kFactorizationMachines &&
      predictor_type == PredictorType::kMulticlassClassifier) {
    throw MakeError(
        "--predictor_type multiclass_classifier is not available for "
        "factorization_machines (binary_classifier or regressor)");
  }
  if (predictor_type == PredictorType::kMulticlassClassifier &&
      (num_classes < 3 || num_classes > 1000000)) {
    throw MakeError("--num_classes ", num_classes, " must be at least 3 for multiclass_classifier");
  }
  if (job == JobKind::kFactorizationMachines && (num_factors < 1 || num_factors > 4096)) {
    throw MakeError("--num_factors ", num_factors, " is outside 1..4096");
  }
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
  if (mini_batch_size < 1) throw MakeError("--mini_batch_size must be at least 1");
  if (epochs < 1) throw MakeError("--epochs must be at least 1");
  if (early_stopping_patience < 1) throw MakeError("--early_stopping_patience must be at least 1");
  if (!(f_beta > 0.0) || std::isinf(f_beta)) {
    throw MakeError("--f_beta ", f_beta, " is not a positive number");
  }
  if (accuracy_top_k < 1)
    throw MakeError("--accuracy_top_k ", accuracy_top_k, " is not at least 1");
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
  if (positive_example_weight_mult != "balanced") {
    char* end = nullptr;
    const double mult = std::strtod(positive_example_weight_mult.c_str(), &end);
    if (positive_example_weight_mult.empty() || *end != '\0' || !std::isfinite(mult) ||
        !(mult > 0)) {
      throw MakeError("--positive_example_weight_mult '", positive_example_weight_mult,
                      "' is not a positive number or balanced");
    }
  }
  MakeOptimizer(weights_optimizer);
  MakeOptimizer(bias_optimizer);
}

std::map<uint32_t, TableSpec> TablesFor(const Hyperparameters& h) {
  std::map<uint32_t, TableSpec> tables;
  TableSpec weights;
  weights.width = h.weight_width();
  weights.optimizer = h.weights_optimizer;
  if (h.job == JobKind::kFactorizationMachines) {
    weights.initializer = MakeInitializer(
        h.linear_init, {InitializerGroup{1, 1 + h.num_factors, h.factors_init}}, h.seed);
  } else {
    weights.initializer = MakeInitializer(h.linear_init, {}, h.seed);
  }
  tables[kWeightTable] = std::move(weights);

  TableSpec bias;
  bias.width = h.job == JobKind::kFactorizationMachines ? 1 : h.classes();
  bias.optimizer = h.bias_optimizer;
  bias.initializer = MakeInitializer(h.bias_init, {}, h.seed + 1);
  tables[kBiasTable] = std::move(bias);

  TableSpec control;
  control.optimizer.name = "sgd";
  control.optimizer.learning_rate = 1.0f;  // a push of -x adds x: the table sums
  tables[kControlTable] = std::move(control);
  return tables;
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
