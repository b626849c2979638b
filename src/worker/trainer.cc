#include "worker/trainer.h"

#include <glog/logging.h>

#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>

#include "io/input_split.h"
#include "kv/error.h"
#include "worker/batch_stream.h"
#include "worker/model_artifact.h"

namespace keel {
namespace {

constexpr double kBarrierTimeoutS = 24 * 3600;
// Control keys (feature indices in the control table).
constexpr uint64_t kStopFeature = 1;
constexpr uint64_t kExamplesFeature = 1000;  // + epoch
// Counts travel as two floats of 20 bits each: exact in float.
constexpr uint64_t kCountBits = 20;

std::string FormatMetrics(const MetricSet& metrics) {
  std::ostringstream out;
  out << std::setprecision(5);
  bool first = true;
  for (const auto& [name, value] : metrics) {
    out << (first ? "" : ", ") << name << " " << value;
    first = false;
  }
  return out.str();
}

// The metric that decides early stopping: lower is better.
double StoppingLoss(const MetricSet& metrics) {
  auto it = metrics.find("objective_loss");
  return it == metrics.end() ? std::numeric_limits<double>::infinity() : it->second;
}

}  // namespace

Trainer::Trainer(Node* node, KVWorker* client, const Hyperparameters& hyperparameters,
                 TrainerOptions options)
    : node_(node),
      client_(client),
      hyperparameters_(hyperparameters),
      options_(std::move(options)),
      model_(hyperparameters),
      bias_key_(std::vector<Key>{MixKey(kBiasFeature)}) {
  if (options_.train.empty()) throw MakeError("--train is required");
  options_.reader.feature_dim = hyperparameters_.feature_dim;
}

void Trainer::AddToControl(uint64_t feature, uint64_t value) {
  const float low = static_cast<float>(value & ((1u << kCountBits) - 1));
  const float high = static_cast<float>(value >> kCountBits);
  SharedArray<const Key> key(std::vector<Key>{MixKey(feature)});
  // The control table runs SGD at rate 1: pushing -x adds x.
  client_->Wait(client_->Push(key, SharedArray<const float>(std::vector<float>{-low, -high}), 2,
                              kControlTable));
}

uint64_t Trainer::ReadControl(uint64_t feature) {
  SharedArray<const Key> key(std::vector<Key>{MixKey(feature)});
  SharedArray<float> value;
  client_->Wait(client_->Pull(key, &value, 2, kControlTable));
  return static_cast<uint64_t>(std::llround(value[0])) +
         (static_cast<uint64_t>(std::llround(value[1])) << kCountBits);
}

Trainer::EpochResult Trainer::TrainEpoch(int epoch) {
  const int rank = node_->rank();
  const int workers = node_->view()->num_workers();
  BatchStream stream(ResolveChannel(options_.train, rank, workers), options_.reader,
                     static_cast<size_t>(hyperparameters_.mini_batch_size));
  const int width = model_.weight_width();
  const int bias_width = model_.bias_width();
  const bool use_bias = hyperparameters_.use_bias;

  struct InFlight {
    PreparedBatch batch;
    SharedArray<float> weights, bias;
    KVWorker::Handle weights_pull = 0, bias_pull = 0;
  };
  auto start_pulls = [&](InFlight* slot) {
    slot->weights_pull = client_->Pull(slot->batch.keys, &slot->weights, width, kWeightTable);
    if (use_bias) slot->bias_pull = client_->Pull(bias_key_, &slot->bias, bias_width, kBiasTable);
  };

  EpochResult result;
  const double begin = MonotonicSeconds();
  double last_report = begin;
  // Two slots, used in turn: a pull writes into its slot's arrays, so a slot
  // stays put until its pulls have been waited for.
  InFlight slots[2];
  int current = 0;
  std::vector<KVWorker::Handle> pushes;
  std::vector<float> weight_gradients, bias_gradient;
  std::vector<float> zero_bias(bias_width, 0.0f);
  bool have = stream.Next(&slots[current].batch);
  if (have) start_pulls(&slots[current]);
  while (have) {
    InFlight& now = slots[current];
    InFlight& next = slots[1 - current];
    const bool have_next = stream.Next(&next.batch);
    // The next batch's rows are read while this one computes: they miss this
    // batch's update (one batch of staleness).
    if (have_next) start_pulls(&next);
    client_->Wait(now.weights_pull);
    if (use_bias) client_->Wait(now.bias_pull);
    result.loss += model_.Gradients(now.batch, now.weights.data(),
                                    use_bias ? now.bias.data() : zero_bias.data(),
                                    &weight_gradients, &bias_gradient);
    for (KVWorker::Handle handle : pushes) client_->Wait(handle);
    pushes.clear();
    pushes.push_back(client_->Push(now.batch.keys,
                                   SharedArray<const float>(std::move(weight_gradients)), width,
                                   kWeightTable));
    if (use_bias) {
      pushes.push_back(client_->Push(bias_key_, SharedArray<const float>(std::move(bias_gradient)),
                                     bias_width, kBiasTable));
    }
    weight_gradients = {};
    bias_gradient = {};
    result.examples += now.batch.batch.rows();
    const double time = MonotonicSeconds();
    if (time - last_report >= options_.progress_interval_s) {
      LOG(INFO) << "worker " << rank << " epoch " << epoch << ": " << result.examples
                << " examples, " << static_cast<uint64_t>(result.examples / (time - begin))
                << " examples/s, mean loss " << result.loss / result.examples;
      last_report = time;
    }
    current = 1 - current;
    have = have_next;
  }
  for (KVWorker::Handle handle : pushes) client_->Wait(handle);
  result.seconds = MonotonicSeconds() - begin;
  if (stream.skipped_records() > 0) {
    LOG(WARNING) << "worker " << rank << " epoch " << epoch << ": skipped "
                 << stream.skipped_records() << " bad records";
  }
  return result;
}

MetricSet Trainer::Evaluate(const std::string& channel) {
  BatchStream stream(ResolveChannel(channel, 0, 1), options_.reader,
                     static_cast<size_t>(hyperparameters_.mini_batch_size));
  const int width = model_.weight_width();
  const bool use_bias = hyperparameters_.use_bias;
  std::vector<float> bias(model_.bias_width(), 0.0f);
  if (use_bias) {
    SharedArray<float> pulled;
    client_->Wait(client_->Pull(bias_key_, &pulled, model_.bias_width(), kBiasTable));
    bias.assign(pulled.begin(), pulled.end());
  }
  std::vector<float> predictions, labels, batch_predictions;
  PreparedBatch batch;
  while (stream.Next(&batch)) {
    SharedArray<float> weights;
    client_->Wait(client_->Pull(batch.keys, &weights, width, kWeightTable));
    model_.Predict(batch, weights.data(), bias.data(), &batch_predictions);
    predictions.insert(predictions.end(), batch_predictions.begin(), batch_predictions.end());
    labels.insert(labels.end(), batch.batch.labels.begin(), batch.batch.labels.end());
  }
  if (labels.empty()) throw MakeError("channel ", channel, " holds no examples");
  switch (hyperparameters_.predictor_type) {
    case PredictorType::kBinaryClassifier:
      return BinaryClassificationMetrics(predictions, labels);
    case PredictorType::kRegressor:
      return RegressionMetrics(predictions, labels);
    case PredictorType::kMulticlassClassifier:
      return MulticlassMetrics(predictions, labels, hyperparameters_.num_classes);
  }
  return {};
}

void Trainer::Run() {
  const int rank = node_->rank();
  const bool leader = rank == 0;
  MetricSet final_metrics;
  double best_loss = std::numeric_limits<double>::infinity();
  int epochs_without_gain = 0;
  double training_seconds = 0;
  uint64_t total_examples = 0;
  int epoch = 0;
  for (epoch = 1; epoch <= hyperparameters_.epochs; ++epoch) {
    const EpochResult result = TrainEpoch(epoch);
    training_seconds += result.seconds;
    LOG(INFO) << "worker " << rank << " epoch " << epoch << " done: " << result.examples
              << " examples in " << std::fixed << std::setprecision(2) << result.seconds << " s ("
              << static_cast<uint64_t>(result.examples / std::max(result.seconds, 1e-9))
              << " examples/s), mean training loss "
              << (result.examples ? result.loss / result.examples : 0.0);
    AddToControl(kExamplesFeature + epoch, result.examples);
    node_->Barrier(kWorkerGroup, kBarrierTimeoutS);
    bool stop = false;
    if (leader) {
      const uint64_t examples = ReadControl(kExamplesFeature + epoch);
      total_examples += examples;
      final_metrics["train:examples_per_epoch"] = static_cast<double>(examples);
      final_metrics["train:epochs"] = epoch;
      std::cout << "epoch " << epoch << ": " << examples << " examples across "
                << node_->view()->num_workers() << " worker(s)";
      if (!options_.validation.empty()) {
        const MetricSet metrics = Evaluate(options_.validation);
        for (const auto& [name, value] : metrics) final_metrics["validation:" + name] = value;
        std::cout << "; validation " << FormatMetrics(metrics);
        const double loss = StoppingLoss(metrics);
        if (!std::isfinite(best_loss) ||
            loss < best_loss - hyperparameters_.early_stopping_tolerance * std::fabs(best_loss)) {
          best_loss = loss;
          epochs_without_gain = 0;
        } else if (++epochs_without_gain >= hyperparameters_.early_stopping_patience) {
          stop = true;
          std::cout << "; no gain for " << epochs_without_gain << " epoch(s): stopping early";
        }
      }
      std::cout << std::endl;
      if (stop) AddToControl(kStopFeature, 1);
    }
    node_->Barrier(kWorkerGroup, kBarrierTimeoutS);
    if (ReadControl(kStopFeature) > 0) break;
  }
  if (!leader) return;
  if (!options_.test.empty()) {
    const MetricSet metrics = Evaluate(options_.test);
    for (const auto& [name, value] : metrics) final_metrics["test:" + name] = value;
    std::cout << "test " << FormatMetrics(metrics) << std::endl;
  }
  // Every worker's examples over the workers' summed training time per worker.
  final_metrics["train:examples_per_second"] =
      training_seconds > 0 ? static_cast<double>(total_examples) / training_seconds : 0;
  if (!options_.model_dir.empty()) {
    WriteModel();
    WriteMetrics(final_metrics);
  }
}

void Trainer::WriteModel() {
  ModelArtifact artifact;
  artifact.hyperparameters = hyperparameters_;
  artifact.hyperparameter_json = options_.hyperparameter_json;
  std::vector<Key> keys;
  std::vector<float> weights;
  const int width = model_.weight_width();
  client_->Dump(kWeightTable, width, &keys, &weights);
  // Sorted by feature index, not by mixed key.
  std::vector<std::pair<uint64_t, size_t>> order(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) order[i] = {UnmixKey(keys[i]), i};
  std::sort(order.begin(), order.end());
  artifact.features.reserve(order.size());
  artifact.weights.reserve(weights.size());
  for (const auto& [feature, index] : order) {
    artifact.features.push_back(feature);
    artifact.weights.insert(artifact.weights.end(), weights.begin() + index * width,
                            weights.begin() + (index + 1) * width);
  }
  artifact.bias.assign(model_.bias_width(), 0.0f);
  if (hyperparameters_.use_bias) {
    SharedArray<float> bias;
    client_->Wait(client_->Pull(bias_key_, &bias, model_.bias_width(), kBiasTable));
    artifact.bias.assign(bias.begin(), bias.end());
  }
  artifact.Write(options_.model_dir);
  LOG(INFO) << "wrote the model (" << artifact.features.size() << " features) to "
            << options_.model_dir;
}

void Trainer::WriteMetrics(const MetricSet& metrics) {
  const std::string path = options_.model_dir + "/metrics.json";
  std::ofstream out(path);
  out << std::setprecision(9) << "{";
  bool first = true;
  for (const auto& [name, value] : metrics) {
    out << (first ? "" : ", ") << "\"" << name << "\": ";
    if (std::isfinite(value)) {
      out << value;
    } else {
      out << "null";
    }
    first = false;
  }
  out << "}\n";
  if (!out) throw MakeError("cannot write ", path);
}

}  // namespace keel
