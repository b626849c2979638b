// Model selection: which of a num_models job's models is the job's model,
// after each epoch (validation, or training loss without a validation
// channel) and at the end.
#ifndef KEEL_WORKER_MODEL_SELECTION_H_
#define KEEL_WORKER_MODEL_SELECTION_H_

#include <vector>

#include "models/metrics.h"
#include "worker/hyperparameters.h"
#include "worker/training_loss.h"

namespace keel {

// A model's score on a channel by the job's selection criterion (higher is
// better): minus its objective_loss. -inf when `metrics` has none or it is
// not a number.
double SelectionScore(const Hyperparameters& hyperparameters, const MetricSet& metrics);

// The model with the highest SelectionScore; the lowest index among equals.
// `per_model` holds one MetricSet per model, at least one.
int BestModel(const Hyperparameters& hyperparameters, const std::vector<MetricSet>& per_model);

// The model with the lowest mean training loss; the lowest index among
// equals (NaN loses).
int BestOnTraining(const ModelLosses& mean_losses);

// `metrics` of model k as a job of several models names them in
// metrics.json and history.jsonl: "model_<k>:<name>".
MetricSet OfModel(int k, const MetricSet& metrics);

}  // namespace keel

#endif  // KEEL_WORKER_MODEL_SELECTION_H_
