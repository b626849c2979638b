#include "worker/trainer.h"

#include <glog/logging.h>

#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>
#include <thread>

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
constexpr uint64_t kGateFeature = 100000;    // + figure
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
      backend_(MakeComputeBackend(options_.device, options_.threads, hyperparameters)),
      model_(*backend_),
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

  // Clocks restart at a new base every epoch, so a worker whose shard had
  // fewer minibatches does not hold the others back in the next one: each
  // worker joins the gate at the epoch's base and leaves it at its end.
  const int64_t base = static_cast<int64_t>(epoch) << 32;
  const int every = std::max(1, options_.clock_every);
  auto clock_after = [&](uint64_t batches) {
    return base + static_cast<int64_t>(batches / static_cast<uint64_t>(every));
  };
  client_->set_clock(base);
  client_->AnnounceClock(base, /*wait=*/true);
  node_->Barrier(kWorkerGroup, kBarrierTimeoutS);

  EpochResult result;
  uint64_t batches = 0;
  const bool slow = rank == options_.slow_rank && options_.slow_factor > 1;
  const double begin = MonotonicSeconds();
  double last_report = begin;
  // Two slots, used in turn: a pull writes into its slot's arrays, so a slot
  // stays put until its pulls have been waited for.
  InFlight slots[2];
  int current = 0;
  std::vector<KVWorker::Handle> pushes;
  std::vector<float> weight_gradients, bias_gradient;
  std::vector<float> zero_bias(bias_width, 0.0f);
  // On an error, forget every request still in flight: their arrays are about
  // to go out of scope.
  auto cancel_all = [&] {
    for (InFlight& slot : slots) {
      if (slot.weights_pull) client_->Cancel(slot.weights_pull);
      if (slot.bias_pull) client_->Cancel(slot.bias_pull);
    }
    for (KVWorker::Handle handle : pushes) client_->Cancel(handle);
  };
  try {
    bool have = stream.Next(&slots[current].batch);
    if (have) start_pulls(&slots[current]);
    while (have) {
      InFlight& now = slots[current];
      InFlight& next = slots[1 - current];
      const bool have_next = stream.Next(&next.batch);
      // The next batch's rows are read while this one computes: they miss this
      // batch's update (one batch of staleness). Its pull carries the clock this
      // worker will have once this batch is pushed.
      client_->set_clock(clock_after(batches + 1));
      if (have_next) {
        start_pulls(&next);
        model_.Prefetch(next.batch);
      }
      const double wait_begin = MonotonicSeconds();
      client_->Wait(now.weights_pull);
      if (use_bias) client_->Wait(now.bias_pull);
      const double compute_begin = MonotonicSeconds();
      result.pull_wait += compute_begin - wait_begin;
      result.loss += model_.Gradients(now.batch, now.weights.data(),
                                      use_bias ? now.bias.data() : zero_bias.data(),
                                      &weight_gradients, &bias_gradient);
      if (slow) {
        const double spent = MonotonicSeconds() - compute_begin;
        std::this_thread::sleep_for(
            std::chrono::duration<double>(spent * (options_.slow_factor - 1)));
      }
      for (KVWorker::Handle handle : pushes) client_->Wait(handle);
      pushes.clear();
      pushes.push_back(client_->Push(now.batch.keys,
                                     SharedArray<const float>(std::move(weight_gradients)), width,
                                     kWeightTable));
      if (use_bias) {
        pushes.push_back(client_->Push(
            bias_key_, SharedArray<const float>(std::move(bias_gradient)), bias_width, kBiasTable));
      }
      weight_gradients = {};
      bias_gradient = {};
      ++batches;
      // Servers this batch's pushes did not reach learn the clock too (only
      // needed when servers gate pulls on it).
      if (options_.staleness != StalenessGate::kAsynchronous &&
          batches % static_cast<uint64_t>(every) == 0) {
        client_->AnnounceClock(clock_after(batches), /*wait=*/false);
      }
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
  } catch (...) {
    cancel_all();
    throw;
  }
  result.seconds = MonotonicSeconds() - begin;
  // Done with this epoch: stop holding back the workers still in it. Requests
  // outside the minibatch loop (validation, control values) carry clock 0,
  // which the gate neither counts nor holds.
  client_->AnnounceClock(kLeaveClock, /*wait=*/true);
  client_->set_clock(0);
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
  double pull_wait_seconds = 0;
  uint64_t total_examples = 0;
  const double started = MonotonicSeconds();
  int epoch = 0;
  for (epoch = 1; epoch <= hyperparameters_.epochs; ++epoch) {
    const EpochResult result = TrainEpoch(epoch);
    training_seconds += result.seconds;
    pull_wait_seconds += result.pull_wait;
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
        AppendHistory(epoch, MonotonicSeconds() - started, examples, metrics);
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
  ReportGate(training_seconds, pull_wait_seconds, &final_metrics);
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

void Trainer::ReportGate(double training_seconds, double pull_wait_seconds, MetricSet* metrics) {
  const GateStats stats = client_->gate_stats();
  const int workers = node_->view()->num_workers();
  AddToControl(kGateFeature, static_cast<uint64_t>(stats.waited_us));
  AddToControl(kGateFeature + 1, stats.waited);
  AddToControl(kGateFeature + 2, stats.pulls);
  AddToControl(kGateFeature + 3, static_cast<uint64_t>(training_seconds * 1e6));
  AddToControl(kGateFeature + 4, static_cast<uint64_t>(pull_wait_seconds * 1e6));
  for (int b = 0; b < GateStats::kBuckets; ++b) {
    AddToControl(kGateFeature + 10 + b, stats.histogram[b]);
  }
  // A maximum does not sum: one key per worker.
  AddToControl(kGateFeature + 100 + node_->rank(),
               static_cast<uint64_t>(std::max<int64_t>(0, stats.max_staleness)));
  node_->Barrier(kWorkerGroup, kBarrierTimeoutS);
  if (node_->rank() != 0) return;
  const double held = ReadControl(kGateFeature) * 1e-6;
  const double worked = ReadControl(kGateFeature + 3) * 1e-6;
  const double waited = ReadControl(kGateFeature + 4) * 1e-6;
  (*metrics)["train:staleness"] = static_cast<double>(options_.staleness);
  // Time workers sat blocked on their next minibatch's pull (the gate, plus
  // the pull's own round trip), and its share of their training time.
  (*metrics)["train:gate_wait_seconds"] = waited;
  (*metrics)["train:gate_wait_share"] = worked > 0 ? waited / worked : 0;
  // Time the servers held pulls at the gate (a held pull may overlap compute).
  (*metrics)["train:pull_hold_seconds"] = held;
  (*metrics)["train:parked_pulls"] = static_cast<double>(ReadControl(kGateFeature + 1));
  (*metrics)["train:pulls"] = static_cast<double>(ReadControl(kGateFeature + 2));
  std::ostringstream histogram;
  for (int b = 0; b < GateStats::kBuckets; ++b) {
    const uint64_t count = ReadControl(kGateFeature + 10 + b);
    (*metrics)[std::string("train:staleness_histogram_") + GateStats::BucketName(b)] =
        static_cast<double>(count);
    histogram << (b ? ", " : "") << GateStats::BucketName(b) << ": " << count;
  }
  uint64_t max_staleness = 0;
  for (int r = 0; r < workers; ++r) {
    max_staleness = std::max(max_staleness, ReadControl(kGateFeature + 100 + r));
  }
  (*metrics)["train:max_staleness"] = static_cast<double>(max_staleness);
  std::cout << "staleness gate ("
            << (options_.staleness < 0 ? std::string("inf") : std::to_string(options_.staleness))
            << "): workers waited " << std::fixed << std::setprecision(2) << waited << " s ("
            << std::setprecision(1) << 100 * (worked > 0 ? waited / worked : 0)
            << "% of training time; servers held pulls " << held << " s), "
            << ReadControl(kGateFeature + 1) << " of " << ReadControl(kGateFeature + 2)
            << " pulls held; observed staleness {" << histogram.str() << "}, max " << max_staleness
            << std::endl;
}

void Trainer::AppendHistory(int epoch, double seconds, uint64_t examples,
                            const MetricSet& metrics) {
  if (options_.model_dir.empty()) return;
  MakeDirectories(options_.model_dir);
  const std::string path = options_.model_dir + "/history.jsonl";
  std::ofstream out(path, epoch == 1 ? std::ios::trunc : std::ios::app);
  out << std::setprecision(9) << "{\"epoch\": " << epoch << ", \"seconds\": " << seconds
      << ", \"examples\": " << examples;
  for (const auto& [name, value] : metrics) {
    out << ", \"validation:" << name << "\": " << (std::isfinite(value) ? value : 0.0);
  }
  out << "}\n";
  if (!out) throw MakeError("cannot write ", path);
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
