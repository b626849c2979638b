#include "worker/evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "base/error.h"
#include "worker/artifact_index.h"
#include "worker/batch_cache.h"
#include "worker/batch_stream.h"
#include "worker/training_loss.h"

namespace keel {
namespace {

// `metrics` with objective_loss the mean training loss `mean_loss` when the
// job trained with a loss other than its predictor type's default (whose
// conventional figure the metric already is); NaN leaves it.
MetricSet WithTrainingLoss(const Hyperparameters& h, MetricSet metrics, double mean_loss) {
  if (h.loss_function().kind != LossKindOf(h.predictor_type, "auto") && !std::isnan(mean_loss)) {
    metrics["objective_loss"] = mean_loss;
  }
  return metrics;
}

// An artifact's weights, looked up by the mixed keys of a batch.
class ArtifactRows {
 public:
  ArtifactRows(const ModelArtifact& artifact, int width)
      : artifact_(artifact), width_(width), index_(artifact.features) {}

  // batch.keys.size() x width floats in `*rows`: each key's weights, zero for
  // features the model never saw.
  void Gather(const PreparedBatch& batch, std::vector<float>* rows) const {
    rows->assign(batch.keys.size() * width_, 0.0f);
    for (size_t k = 0; k < batch.keys.size(); ++k) {
      const size_t row = index_.Find(batch.keys[k]);
      if (row == ArtifactIndex::kNoRow) continue;
      std::copy_n(artifact_.weights.begin() + row * width_, width_, rows->begin() + k * width_);
    }
  }

 private:
  const ModelArtifact& artifact_;
  const int width_;
  const ArtifactIndex index_;
};

// Cuts `prepared` to its first `rows` rows (and their key set) if it has more.
void KeepFirstRows(uint64_t rows, PreparedBatch* prepared) {
  Batch& batch = prepared->batch;
  if (batch.rows() <= rows) return;
  batch.row_offsets.resize(rows + 1);
  batch.labels.resize(rows * batch.label_width);
  batch.indices.resize(batch.row_offsets.back());
  batch.values.resize(batch.row_offsets.back());
  PrepareKeys(prepared);
}

// The memory `prepared` takes (its arrays' capacities).
uint64_t HeldBytes(const PreparedBatch& prepared) {
  return prepared.batch.memory_bytes() + prepared.keys.size() * sizeof(Key) +
         (prepared.positions.capacity() + prepared.key_offsets.capacity() +
          prepared.nonzeros_by_key.capacity()) *
             sizeof(uint32_t);
}

// One pass's batches of a channel: those held for its input (`held`), or
// read from the text, then gathered, while they take at most `gather_bytes`
// (0: none gathered), for holding once the pass has read them all.
class ChannelBatches {
 public:
  ChannelBatches(std::vector<InputSplit> splits, const ReaderOptions& reader, size_t batch_size,
                 const std::vector<PreparedBatch>* held, uint64_t gather_bytes)
      : held_(held), gather_bytes_(gather_bytes), gathering_(gather_bytes > 0) {
    if (held_ == nullptr) stream_.emplace(std::move(splits), reader, batch_size);
  }

  // The next batch (valid until the next call and, if gathered, until
  // TakeGathered); null after the last.
  const PreparedBatch* Next() {
    if (held_ != nullptr) {
      if (next_held_ < held_->size()) return &(*held_)[next_held_++];
      ended_ = true;
      return nullptr;
    }
    if (!stream_->Next(&own_)) {
      ended_ = true;
      return nullptr;
    }
    if (!gathering_) return &own_;
    gathered_bytes_ += HeldBytes(own_);
    if (gathered_bytes_ > gather_bytes_) {
      gathering_ = false;
      gathered_.clear();
      return &own_;
    }
    gathered_.push_back(std::move(own_));
    return &gathered_.back();
  }

  // Every batch of the text, if the pass read them all and they fit.
  std::optional<std::vector<PreparedBatch>> TakeGathered() {
    if (!gathering_ || !ended_) return std::nullopt;
    return std::move(gathered_);
  }

 private:
  const std::vector<PreparedBatch>* held_;
  std::optional<BatchStream> stream_;
  PreparedBatch own_;
  size_t next_held_ = 0;
  uint64_t gather_bytes_, gathered_bytes_ = 0;
  bool gathering_, ended_ = false;
  std::vector<PreparedBatch> gathered_;
};

// Model k's share of predictions made by every model (rows x models x width).
std::vector<float> ModelPredictions(const std::vector<float>& all, int models, int k,
                                    size_t width) {
  const size_t rows = all.size() / (width * static_cast<size_t>(models));
  std::vector<float> own(rows * width);
  for (size_t row = 0; row < rows; ++row) {
    std::copy_n(all.begin() + (row * models + k) * width, width, own.begin() + row * width);
  }
  return own;
}

}  // namespace

Evaluator::Evaluator(KVWorker* client, ComputeBackend* models, ComputeBackend* one_model,
                     const Hyperparameters& hyperparameters, const ReaderOptions& reader)
    : client_(client),
      models_(models),
      one_model_(one_model),
      hyperparameters_(hyperparameters),
      reader_(reader),
      bias_key_(BiasKey()) {}

MetricSet Evaluator::Evaluate(const std::string& channel, const ModelArtifact* artifact,
                              std::vector<float>* labels) {
  ChannelPredictions scored = Predict(channel, artifact);
  Hyperparameters scoring = hyperparameters_;
  if (artifact != nullptr) scoring.threshold = artifact->hyperparameters.threshold;
  MetricSet metrics =
      PredictionMetrics(scoring, scored.predictions, scored.labels, scored.mean_loss);
  if (labels != nullptr) *labels = std::move(scored.labels);
  return metrics;
}

ChannelPredictions Evaluator::Predict(const std::string& channel, const ModelArtifact* artifact,
                                      uint64_t max_rows, const ReaderOptions* reader) {
  return std::move(Score(channel, artifact, max_rows, reader ? *reader : reader_)[0]);
}

std::vector<ChannelPredictions> Evaluator::PredictModels(const std::string& channel,
                                                         const ModelArtifact* models,
                                                         const ReaderOptions* reader) {
  return Score(channel, models, std::numeric_limits<uint64_t>::max(), reader ? *reader : reader_,
               /*may_hold=*/true);
}

std::vector<ChannelPredictions> Evaluator::Score(const std::string& channel,
                                                 const ModelArtifact* artifact, uint64_t max_rows,
                                                 const ReaderOptions& reader, bool may_hold) {
  const size_t batch_size = static_cast<size_t>(hyperparameters_.mini_batch_size);
  std::vector<InputSplit> splits = ResolveChannel(channel, 0, 1);
  const bool holdable =
      hold_max_bytes_ > 0 && std::none_of(splits.begin(), splits.end(),
                                          [](const InputSplit& split) { return split.is_pipe; });
  const uint64_t key = holdable ? BatchCacheKey(splits, reader, batch_size) : 0;
  // The batches come from what is held for this very input, or from the text
  // (and are then held if the pass reads to the end within the bound).
  const bool from_held = holdable && held_ && held_->key == key;
  const bool hold = holdable && may_hold && !from_held;
  if (hold) held_.reset();  // for input that changed, or other input
  ChannelBatches batches(std::move(splits), reader, batch_size,
                         from_held ? &held_->batches : nullptr, hold ? hold_max_bytes_ : 0);
  // An artifact of one model (of several, when JoinModels made it).
  ComputeBackend* model =
      artifact != nullptr && artifact->hyperparameters.num_models == 1 ? one_model_ : models_;
  const int width = model->weight_width();
  const std::vector<float> bias = BiasFor(artifact);
  std::optional<ArtifactRows> artifact_rows;
  if (artifact != nullptr) artifact_rows.emplace(*artifact, width);
  ChannelPredictions scored;
  std::vector<float> batch_predictions, local_weights;
  ModelLosses losses(model->num_models(), 0.0);
  PreparedBatch cut;
  while (scored.labels.size() < max_rows) {
    const PreparedBatch* next = batches.Next();
    if (next == nullptr) break;
    const uint64_t wanted = max_rows - scored.labels.size();
    if (next->batch.rows() > wanted) {
      cut = *next;
      KeepFirstRows(wanted, &cut);
      next = &cut;
    }
    const PreparedBatch& batch = *next;
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
    AddLosses(model->LastModelLosses(loss), &losses);
    scored.predictions.insert(scored.predictions.end(), batch_predictions.begin(),
                              batch_predictions.end());
    scored.labels.insert(scored.labels.end(), batch.batch.labels.begin(), batch.batch.labels.end());
  }
  if (std::optional<std::vector<PreparedBatch>> all = batches.TakeGathered()) {
    held_ = HeldChannel{key, std::move(*all)};
  }
  if (scored.labels.empty()) throw MakeError("channel ", channel, " holds no examples");
  const double rows = static_cast<double>(scored.labels.size());
  const int models = model->num_models();
  if (models == 1) {
    scored.mean_loss = losses[0] / rows;
    return {std::move(scored)};
  }
  std::vector<ChannelPredictions> per_model(models);
  const size_t classes = static_cast<size_t>(model->prediction_width() / models);
  for (int k = 0; k < models; ++k) {
    per_model[k].predictions = ModelPredictions(scored.predictions, models, k, classes);
    per_model[k].labels = scored.labels;
    per_model[k].mean_loss = losses[k] / rows;
  }
  return per_model;
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
  MetricSet metrics;
  switch (h.predictor_type) {
    case PredictorType::kBinaryClassifier:
      metrics = BinaryClassificationMetrics(predictions, labels, h.DecisionThreshold(), h.f_beta);
      // SageMaker's factorization machine names its (logistic) loss so.
      if (h.job == JobKind::kFactorizationMachines &&
          h.loss_function().kind == LossKind::kLogistic) {
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
  return WithTrainingLoss(h, std::move(metrics), mean_loss);
}

PredictionTally::PredictionTally(const Hyperparameters& hyperparameters)
    : hyperparameters_(hyperparameters) {
  const Hyperparameters& h = hyperparameters_;
  if (h.predictor_type == PredictorType::kMulticlassClassifier) {
    multiclass_.emplace(h.num_classes, h.accuracy_top_k, h.f_beta);
  }
}

void PredictionTally::Add(const std::vector<float>& predictions, const std::vector<float>& labels) {
  if (!multiclass_) {
    predictions_.insert(predictions_.end(), predictions.begin(), predictions.end());
    labels_.insert(labels_.end(), labels.begin(), labels.end());
    return;
  }
  const size_t width = static_cast<size_t>(hyperparameters_.num_classes);
  if (predictions.size() != labels.size() * width) {
    throw MakeError("PredictionTally: ", predictions.size(), " probabilities but ", labels.size(),
                    " labels x ", width, " classes");
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    multiclass_->Add(predictions.data() + i * width, labels[i]);
  }
}

size_t PredictionTally::examples() const {
  return multiclass_ ? multiclass_->examples() : labels_.size();
}

MetricSet PredictionTally::Metrics(double mean_loss) const {
  if (!multiclass_) return PredictionMetrics(hyperparameters_, predictions_, labels_, mean_loss);
  return WithTrainingLoss(hyperparameters_, multiclass_->Metrics(), mean_loss);
}

}  // namespace keel
