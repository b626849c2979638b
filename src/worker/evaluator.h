// Evaluator: scores a data channel with a model and returns its metrics
// (worker 0's job, after each epoch on the validation channel and at the end
// on the test channel).
#ifndef KEEL_WORKER_EVALUATOR_H_
#define KEEL_WORKER_EVALUATOR_H_

#include <string>
#include <vector>

#include "io/readers.h"
#include "kv/kv_worker.h"
#include "models/metrics.h"
#include "worker/compute_backend.h"
#include "worker/hyperparameters.h"
#include "worker/model_artifact.h"

namespace keel {

// The metrics of the job's predictor type (models/metrics.h) for gathered
// `predictions` and `labels`, F-scores with --f_beta and top-k accuracy with
// --accuracy_top_k; a factorization machine's binary classifier also reports
// its loss as binary_classification_cross_entropy, SageMaker's FM's name for
// it. `keel predict` scores with this too. Throws Error as the metric does.
MetricSet PredictionMetrics(const Hyperparameters& hyperparameters,
                            const std::vector<float>& predictions,
                            const std::vector<float>& labels);

class Evaluator {
 public:
  // `client` and `model` must outlive the evaluator. `reader` reads the
  // channels (their --feature_dim already set).
  Evaluator(KVWorker* client, ComputeBackend* model, const Hyperparameters& hyperparameters,
            const ReaderOptions& reader);

  // Scores every example of `channel` (a file, folder, or pipe:PATH) with the
  // servers' current weights, or with `artifact`'s if given (features it
  // lacks weigh zero). Metric names are SageMaker's, without the channel
  // prefix: PredictionMetrics. Throws Error on bad data, a failed request, or
  // an empty channel.
  MetricSet Evaluate(const std::string& channel, const ModelArtifact* artifact = nullptr);

 private:
  // The bias to score with: the artifact's, the servers' (pulled), or zeros.
  std::vector<float> BiasFor(const ModelArtifact* artifact);
  // The task's metrics of the gathered predictions.
  MetricSet MetricsOf(const std::vector<float>& predictions,
                      const std::vector<float>& labels) const;

  KVWorker* client_;
  ComputeBackend* model_;
  Hyperparameters hyperparameters_;
  ReaderOptions reader_;
  SharedArray<const Key> bias_key_;
};

}  // namespace keel

#endif  // KEEL_WORKER_EVALUATOR_H_
