// The trivial predictor and the guard against a model no better than it.
//
// The trivial predictor is the best constant the training labels give: a
// binary classifier's base rate, a multiclass classifier's class shares, a
// regressor's label mean, taken from the data statistics' sample. Its figures
// on a channel's labels come from the same metric functions as the model's
// (models/metrics.h), under the names they are compared by: accuracy, the
// mean squared error, and the cross-entropy when the job trains on it (the
// default loss of a classifier). A model worse than it on any of them is
// reported at the end of the job (WorseThanTrivial): a broken model is never
// silent.
#ifndef KEEL_WORKER_TRIVIAL_PREDICTOR_H_
#define KEEL_WORKER_TRIVIAL_PREDICTOR_H_

#include <vector>

#include "io/batch.h"
#include "models/metrics.h"
#include "worker/hyperparameters.h"

namespace keel {

struct TrivialPredictor {
  bool known = false;  // false: no labelled sample (a pipe)
  // Classifiers: each class's share of the sample (binary: {negative,
  // positive}), with half a row added to every class so that none is 0.
  std::vector<double> class_shares;
  double label_mean = 0.0;  // regressor
};

// The trivial predictor of `sample`'s labels under `hyperparameters`'
// predictor type.
TrivialPredictor FitTrivialPredictor(const Batch& sample, const Hyperparameters& hyperparameters);

// Its figures on `labels` (a channel's, as ChannelPredictions holds them),
// named as the model's metrics: binary_classification_accuracy or
// multiclass_accuracy, objective_loss when the job's loss is the predictor
// type's default (logistic, softmax, squared), and mse for a regressor.
// Empty when the predictor is not known or `labels` is empty.
MetricSet TrivialMetrics(const TrivialPredictor& trivial, const Hyperparameters& hyperparameters,
                         const std::vector<float>& labels);

}  // namespace keel

#endif  // KEEL_WORKER_TRIVIAL_PREDICTOR_H_
