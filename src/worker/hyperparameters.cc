#include "worker/hyperparameters.h"

#include <cmath>

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
  if (mini_batch_size < 1) throw MakeError("--mini_batch_size must be at least 1");
  if (epochs < 1) throw MakeError("--epochs must be at least 1");
  if (early_stopping_patience < 1) throw MakeError("--early_stopping_patience must be at least 1");
  if (!(f_beta > 0.0) || std::isinf(f_beta)) {
    throw MakeError("--f_beta ", f_beta, " is not a positive number");
  }
  if (accuracy_top_k < 1)
    throw MakeError("--accuracy_top_k ", accuracy_top_k, " is not at least 1");
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

}  // namespace keel
