#include "worker/evaluator.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>

#include "base/error.h"
#include "worker/batch_stream.h"
#include "worker/training_loss.h"

namespace keel {
namespace {

// An artifact's weights, looked up by the mixed keys of a batch.
class ArtifactRows {
 public:
  ArtifactRows(const ModelArtifact& artifact, int width) : artifact_(artifact), width_(width) {
    rows_.reserve(artifact.features.size());
    for (size_t i = 0; i < artifact.features.size(); ++i) rows_[MixKey(artifact.features[i])] = i;
  }

  // batch.keys.size() x width floats in `*rows`: each key's weights, zero for
  // features the model never saw.
  void Gather(const PreparedBatch& batch, std::vector<float>* rows) const {
    rows->assign(batch.keys.size() * width_, 0.0f);
    for (size_t k = 0; k < batch.keys.size(); ++k) {
      const auto found = rows_.find(batch.keys[k]);
      if (found == rows_.end()) continue;
      std::copy_n(artifact_.weights.begin() + found->second * width_, width_,
                  rows->begin() + k * width_);
    }
  }

 private:
  const ModelArtifact& artifact_;
  const int width_;
  std::unordered_map<Key, size_t> rows_;  // mixed key -> the feature's row
};

}  // namespace

Evaluator::Evaluator(KVWorker* client, ComputeBackend* models, ComputeBackend* one_model,
                     const Hyperparameters& hyperparameters, const ReaderOptions& reader)
    : client_(client),
      models_(models),
      one_model_(one_model),
      hyperparameters_(hyperparameters),
      reader_(reader),
      bias_key_(BiasKey()) {}

std::vector<MetricSet> Evaluator::EvaluateModels(const std::string& channel) {
  const Scores scores = Score(channel, nullptr);
  const size_t rows = scores.labels.size();
  const int models = models_->num_models();
  const size_t width = static_cast<size_t>(models_->prediction_width());
  const size_t classes = width / static_cast<size_t>(models);
  std::vector<MetricSet> metrics;
  std::vector<float> predictions(rows * classes);
  for (int k = 0; k < models; ++k) {
    for (size_t row = 0; row < rows; ++row) {
      std::copy_n(scores.predictions.begin() + row * width + k * classes, classes,
                  predictions.begin() + row * classes);
    }
    metrics.push_back(PredictionMetrics(hyperparameters_, predictions, scores.labels,
                                        scores.losses[k] / static_cast<double>(rows)));
  }
  return metrics;
}

MetricSet Evaluator::Evaluate(const std::string& channel, const ModelArtifact* artifact) {
  if (artifact == nullptr) return EvaluateModels(channel)[0];
  const Scores scores = Score(channel, artifact);
  return PredictionMetrics(hyperparameters_, scores.predictions, scores.labels,
                           scores.losses[0] / static_cast<double>(scores.labels.size()));
}

Evaluator::Scores Evaluator::Score(const std::string& channel, const ModelArtifact* artifact) {
  BatchStream stream(ResolveChannel(channel, 0, 1), reader_,
                     static_cast<size_t>(hyperparameters_.mini_batch_size));
  ComputeBackend* model = artifact != nullptr ? one_model_ : models_;
  const int width = model->weight_width();
  const std::vector<float> bias = BiasFor(artifact);
  std::optional<ArtifactRows> artifact_rows;
  if (artifact != nullptr) artifact_rows.emplace(*artifact, width);
  Scores scores;
  scores.losses.assign(model->num_models(), 0.0);
  std::vector<float> batch_predictions, local_weights;
  PreparedBatch batch;
  while (stream.Next(&batch)) {
    SharedArray<float> pulled;
    const float* rows = nullptr;
    if (artifact_rows) {
      artifact_rows->Gather(batch, &local_weights);
      rows = local_weights.data();
    } else {
      client_->Wait(client_->Pull(batch.keys, &pulled, width, kWeightTable));
      rows = pulled.data();
    }
    const double loss = model->Predict(batch, rows, bias.data(), &batch_predictions);
    AddLosses(model->LastModelLosses(loss), &scores.losses);
    scores.predictions.insert(scores.predictions.end(), batch_predictions.begin(),
                              batch_predictions.end());
    scores.labels.insert(scores.labels.end(), batch.batch.labels.begin(),
                         batch.batch.labels.end());
  }
  if (scores.labels.empty()) throw MakeError("channel ", channel, " holds no examples");
  return scores;
}

std::vector<float> Evaluator::BiasFor(const ModelArtifact* artifact) {
  if (artifact != nullptr) return artifact->bias;
  std::vector<float> bias(models_->bias_width(), 0.0f);
  if (hyperparameters_.use_bias) {
    SharedArray<float> pulled;
    client_->Wait(client_->Pull(bias_key_, &pulled, models_->bias_width(), kBiasTable));
    bias.assign(pulled.begin(), pulled.end());
  }
  return bias;
}

MetricSet PredictionMetrics(const Hyperparameters& h, const std::vector<float>& predictions,
                            const std::vector<float>& labels, double mean_loss) {
  const LossKind loss = h.loss_function().kind;
  MetricSet metrics;
  switch (h.predictor_type) {
    case PredictorType::kBinaryClassifier:
      metrics = BinaryClassificationMetrics(predictions, labels, h.DecisionThreshold(), h.f_beta);
      // SageMaker's factorization machine names its (logistic) loss so.
      if (h.job == JobKind::kFactorizationMachines && loss == LossKind::kLogistic) {
        metrics["binary_classification_cross_entropy"] = metrics.at("objective_loss");
      }
      break;
    case PredictorType::kRegressor:
      metrics = RegressionMetrics(predictions, labels);
      break;
    case PredictorType::kMulticlassClassifier:
      metrics = MulticlassMetrics(predictions, labels, h.num_classes, h.accuracy_top_k, h.f_beta);
      break;
  }
  if (loss != LossKindOf(h.predictor_type, "auto") && !std::isnan(mean_loss)) {
    metrics["objective_loss"] = mean_loss;
  }
  return metrics;
}

}  // namespace keel
