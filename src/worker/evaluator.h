// Evaluator: scores a data channel with a model and returns its metrics
// (worker 0's job, after each epoch on the validation channel and at the end
// on the test channel).
#ifndef KEEL_WORKER_EVALUATOR_H_
#define KEEL_WORKER_EVALUATOR_H_

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "io/readers.h"
#include "kv/kv_worker.h"
#include "models/metrics.h"
#include "worker/compute_backend.h"
#include "worker/hyperparameters.h"
#include "worker/model_artifact.h"
#include "worker/prepared_batch.h"

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

// PredictionMetrics over a data set given a batch at a time, without holding
// every class score of every example: a multiclass classifier's examples are
// tallied as they come (MulticlassTally: memory per class, not per example); a
// binary classifier's and a regressor's predictions, one float per example,
// are kept (the AUC ranks them all). Metrics(mean_loss) returns exactly what
// PredictionMetrics returns for every batch's predictions and labels joined.
// Not safe for concurrent use.
class PredictionTally {
 public:
  // Throws Error as MulticlassTally's constructor does for a multiclass
  // classifier's classes, accuracy_top_k or f_beta.
  explicit PredictionTally(const Hyperparameters& hyperparameters);

  // Adds a batch: `predictions` holds labels.size() rows of the predictor's
  // width (num_classes for a multiclass classifier, else 1). Throws Error
  // when the sizes disagree, and as MulticlassTally::Add does.
  void Add(const std::vector<float>& predictions, const std::vector<float>& labels);

  // The examples added so far.
  size_t examples() const;

  // PredictionMetrics of every example added, `mean_loss` as there. Throws
  // Error as PredictionMetrics does.
  MetricSet Metrics(double mean_loss = std::numeric_limits<double>::quiet_NaN()) const;

 private:
  Hyperparameters hyperparameters_;
  std::optional<MulticlassTally> multiclass_;  // a multiclass classifier's
  std::vector<float> predictions_, labels_;    // a binary classifier's or regressor's
};

// A channel's predictions under one model, and their labels.
struct ChannelPredictions {
  std::vector<float> predictions;  // rows x classes() for multiclass, else one per row
  std::vector<float> labels;       // one per row
  double mean_loss = 0.0;          // the mean training loss (ExampleLoss) over these rows
};

class Evaluator {
 public:
  // `client`, `models` (the job's backend: every model) and `one_model` (a
  // backend of one model, for artifacts; may be `models` when the job has
  // one) must outlive the evaluator. `reader` reads the channels (their
  // --feature_dim already set).
  Evaluator(KVWorker* client, ComputeBackend* models, ComputeBackend* one_model,
            const Hyperparameters& hyperparameters, const ReaderOptions& reader);

  // Scores every example of `channel` (a file, folder, or pipe:PATH) with the
  // servers' current weights (model 0's of several), or with `artifact`'s if
  // given (features it lacks weigh zero). Metric names are SageMaker's, without the channel
  // prefix: PredictionMetrics, a binary classifier labelled by the artifact's
  // threshold when given. Throws Error on bad data, a failed request, or an
  // empty channel.
  // `labels`, if given, receives the channel's labels.
  MetricSet Evaluate(const std::string& channel, const ModelArtifact* artifact = nullptr,
                     std::vector<float>* labels = nullptr);

  // The predictions and labels of the first `max_rows` (>= 1) examples of
  // `channel` (all of them when it has fewer), scored as Evaluate scores them.
  // Throws Error as Evaluate does.
  // `reader`, if given, reads the channel instead of the evaluator's own
  // (here and in PredictModels: the held-out rows of a training channel).
  ChannelPredictions Predict(const std::string& channel, const ModelArtifact* artifact = nullptr,
                             uint64_t max_rows = std::numeric_limits<uint64_t>::max(),
                             const ReaderOptions* reader = nullptr);

  // The predictions and labels of every example of `channel` under each of
  // the job's models on the servers (num_models), or in `models` if given (an
  // artifact of every model's columns: JoinModels), in one pass over the
  // data: one ChannelPredictions per model. Throws Error as Evaluate does.
  std::vector<ChannelPredictions> PredictModels(const std::string& channel,
                                                const ModelArtifact* models = nullptr,
                                                const ReaderOptions* reader = nullptr);

  // Keeps the prepared batches of the channel PredictModels last read to
  // its end (the validation channel, read every epoch), when they take at
  // most `max_bytes`, so that the next pass over it parses nothing; 0 (the
  // default) keeps none. Any pass over the same input (Predict, Evaluate)
  // reads them too. What is kept is for those files as they were (their sizes
  // and versions) read with those reader options: any change reads the text
  // again, and a PredictModels pass over other input lets go of them first.
  // A pipe is never kept (each pass reads what the pipe gives).
  void HoldChannels(uint64_t max_bytes) { hold_max_bytes_ = max_bytes; }

  // Whether a channel is held (HoldChannels).
  bool holds_a_channel() const { return held_.has_value(); }

 private:
  // The first `max_rows` examples of `channel` under each model of the
  // servers' weights, or under `artifact`.
  std::vector<ChannelPredictions> Score(const std::string& channel, const ModelArtifact* artifact,
                                        uint64_t max_rows, const ReaderOptions& reader,
                                        bool may_hold = false);
  // The bias to score with: the artifact's, the servers' (pulled), or zeros.
  std::vector<float> BiasFor(const ModelArtifact* artifact);
  // A channel's prepared batches, for the splits and reader options whose
  // BatchCacheKey is `key`.
  struct HeldChannel {
    uint64_t key = 0;
    std::vector<PreparedBatch> batches;
  };
  KVWorker* client_;
  ComputeBackend* models_;
  ComputeBackend* one_model_;
  Hyperparameters hyperparameters_;
  ReaderOptions reader_;
  SharedArray<const Key> bias_key_;
  uint64_t hold_max_bytes_ = 0;
  std::optional<HeldChannel> held_;
};

}  // namespace keel

#endif  // KEEL_WORKER_EVALUATOR_H_
