// Evaluator: scores a data channel with a model and returns its metrics
// (worker 0's job, after each epoch on the validation channel and at the end
// on the test channel).
#ifndef KEEL_WORKER_EVALUATOR_H_
#define KEEL_WORKER_EVALUATOR_H_

#include <limits>
#include <string>
#include <vector>

#include "io/readers.h"
#include "kv/kv_worker.h"
#include "models/metrics.h"
#include "worker/compute_backend.h"
#include "worker/hyperparameters.h"
#include "worker/model_artifact.h"

namespace keel {

// The metrics of the job's predictor type (models/metrics.h, SageMaker's
// names) for the predictions ExampleLoss made and their labels: F-scores with
// --f_beta, top-k accuracy with --accuracy_top_k; a factorization machine's
// logistic binary classifier also reports its loss as
// binary_classification_cross_entropy, SageMaker's FM's name for it.
// `mean_loss` is the mean training loss over the same examples: it is the
// objective_loss of every loss but the predictor type's default (logistic,
// squared_loss, softmax_loss), which keep their conventional figures
// (cross-entropy, mean squared error); NaN leaves objective_loss as the metric
// computes it. A binary classifier labels an example positive when its
// prediction reaches hyperparameters.DecisionThreshold() (a hinge_loss
// classifier's predictions are margins: 0 by default, not 0.5). `keel predict` scores with this
// too. Throws Error as models/metrics.h does.
MetricSet PredictionMetrics(const Hyperparameters& hyperparameters,
                            const std::vector<float>& predictions, const std::vector<float>& labels,
                            double mean_loss = std::numeric_limits<double>::quiet_NaN());

class Evaluator {
 public:
  // `client`, `models` (the job's backend: every model) and `one_model` (a
  // backend of one model, for artifacts; may be `models` when the job has
  // one) must outlive the evaluator. `reader` reads the channels (their
  // --feature_dim already set).
  Evaluator(KVWorker* client, ComputeBackend* models, ComputeBackend* one_model,
            const Hyperparameters& hyperparameters, const ReaderOptions& reader);

  // Scores every example of `channel` (a file, folder, or pipe:PATH) with
  // each of the job's models on the servers, in one pass over the data: one
  // MetricSet per model. Metric names are SageMaker's, without the channel
  // prefix: PredictionMetrics. Throws Error on bad data, a failed request, or
  // an empty channel.
  std::vector<MetricSet> EvaluateModels(const std::string& channel);

  // The same for one model: `artifact`'s if given (features it lacks weigh
  // zero), else the servers' model 0.
  MetricSet Evaluate(const std::string& channel, const ModelArtifact* artifact = nullptr);

 private:
  // Every example's predictions (rows x backend's prediction width) and
  // labels, and the summed loss per model, with the servers' weights or
  // `artifact`'s.
  struct Scores {
    std::vector<float> predictions, labels;
    std::vector<double> losses;
  };
  Scores Score(const std::string& channel, const ModelArtifact* artifact);
  // The bias to score with: the artifact's, the servers' (pulled), or zeros.
  std::vector<float> BiasFor(const ModelArtifact* artifact);
  KVWorker* client_;
  ComputeBackend* models_;
  ComputeBackend* one_model_;
  Hyperparameters hyperparameters_;
  ReaderOptions reader_;
  SharedArray<const Key> bias_key_;
};

}  // namespace keel

#endif  // KEEL_WORKER_EVALUATOR_H_
