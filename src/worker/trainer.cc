#include "worker/trainer.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "base/error.h"
#include "base/files.h"
#include "base/time.h"
#include "io/checkpoint.h"
#include "io/input_split.h"
#include "io/storage.h"
#include "worker/batch_stream.h"
#include "worker/model_artifact.h"

namespace keel {
namespace {

constexpr double kBarrierTimeoutS = 24 * 3600;
// Control keys (feature indices in the control table).
constexpr uint64_t kStopFeature = 1;
constexpr uint64_t kGateFeature = 100000;  // + figure
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

Trainer::EpochResult Trainer::TrainEpoch(int epoch, const proto::WorkerCursor& resume) {
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
  // A resumed epoch starts after the minibatches the checkpoint holds.
  // A worker that took over a departed worker's rank starts where that one's
  // last progress report left off (all of it, if its share was done or taken).
  const bool resumed = resume.epoch() == epoch && (resume.batches() > 0 || resume.epoch_done());
  EpochResult result;
  uint64_t batches = 0;
  if (resumed && !resume.epoch_done()) {
    batches = resume.batches();
    result.examples = resume.examples();
    result.resumed_examples = resume.examples();  // read before, not in this process
    result.loss = resume.loss();
  }
  client_->set_clock(clock_after(batches));
  client_->AnnounceClock(clock_after(batches), /*wait=*/true);
  node_->Barrier(kWorkerGroup, kBarrierTimeoutS, "epoch " + std::to_string(epoch) + " start");
  // Between epochs: a checkpoint (unless this is where the job resumed).
  const int checkpoint_every = node_->view()->checkpoint_every();
  if (checkpoints() && epoch > 1 && batches == 0 && resume.epoch() != epoch) {
    StopForCheckpoint(epoch, 0, result, /*final=*/false);
  }
  if (resumed && resume.epoch_done()) {
    PreparedBatch skipped;
    while (stream.Next(&skipped)) ++batches;
  } else {
    PreparedBatch skipped;
    for (uint64_t b = 0; b < batches; ++b) {
      if (!stream.Next(&skipped)) {
        throw MakeError("worker ", rank, " cannot resume epoch ", epoch, " after ", batches,
                        " minibatches: its shard has only ", b, " (different data?)");
      }
    }
  }
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
      // A server advances this worker's clock on the first message stamped
      // with it, and may then answer pulls held for it: so the bias goes
      // first, still stamped with the clock before this batch, and the
      // weights (one message per server) carry the new clock.
      if (use_bias) {
        client_->set_clock(clock_after(batches));
        pushes.push_back(client_->Push(
            bias_key_, SharedArray<const float>(std::move(bias_gradient)), bias_width, kBiasTable));
        client_->set_clock(clock_after(batches + 1));
      }
      pushes.push_back(client_->Push(now.batch.keys,
                                     SharedArray<const float>(std::move(weight_gradients)), width,
                                     kWeightTable));
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
      node_->SetProgress(CursorAt(epoch, batches, result));
      if (checkpoint_every > 0 && batches % static_cast<uint64_t>(checkpoint_every) == 0) {
        // Every push so far applied, none after: the servers copy this state.
        for (KVWorker::Handle handle : pushes) client_->Wait(handle);
        pushes.clear();
        StopForCheckpoint(epoch, batches, result, /*final=*/false);
      }
      const double time = MonotonicSeconds();
      if (time - last_report >= options_.progress_interval_s) {
        LOG(INFO) << "worker " << rank << " epoch " << epoch << ": " << result.examples
                  << " examples, "
                  << static_cast<uint64_t>((result.examples - result.resumed_examples) /
                                           (time - begin))
                  << " examples/s, mean loss " << result.loss / result.examples;
        last_report = time;
      }
      current = 1 - current;
      have = have_next;
    }
    for (KVWorker::Handle handle : pushes) client_->Wait(handle);
    pushes.clear();
  } catch (...) {
    cancel_all();
    throw;
  }
  result.seconds = MonotonicSeconds() - begin;
  if (checkpoints()) {
    // Checkpoints later in this epoch need not wait for this worker.
    node_->ReportEpochDone(CursorAt(epoch, batches, result));
  }
  // Done with this epoch: stop holding back the workers still in it. Requests
  // outside the minibatch loop (validation, control values) carry clock 0,
  // which the gate neither counts nor holds.
  client_->AnnounceClock(kLeaveClock, /*wait=*/true);
  client_->set_clock(0);
  ReadOrphanedShares(epoch, batches, &result);
  if (stream.skipped_records() > 0) {
    LOG(WARNING) << "worker " << rank << " epoch " << epoch << ": skipped "
                 << stream.skipped_records() << " bad records";
  }
  return result;
}

void Trainer::ReadOrphanedShares(int epoch, uint64_t batches, EpochResult* result) {
  const proto::WorkerCursor share = CursorAt(epoch, batches, *result);
  proto::WorkerCursor work, finished;
  int part = 0, parts = 0;
  bool have_finished = false;
  while (node_->TakeOrphanWork(share, have_finished ? &finished : nullptr, part, parts, &work,
                               &part, &parts, &result->epoch_examples, kBarrierTimeoutS)) {
    uint64_t part_examples = 0;
    LOG(WARNING) << "worker " << node_->rank() << " epoch " << epoch << ": reads part " << part
                 << " of " << parts << " of worker " << work.rank() << "'s share from minibatch "
                 << work.batches() << " (that worker left)";
    BatchStream stream(ResolveChannel(options_.train, work.rank(), node_->view()->num_workers()),
                       options_.reader, static_cast<size_t>(hyperparameters_.mini_batch_size));
    const int width = model_.weight_width();
    const bool use_bias = hyperparameters_.use_bias;
    std::vector<float> zero_bias(model_.bias_width(), 0.0f);
    std::vector<float> weight_gradients, bias_gradient;
    PreparedBatch batch;
    for (uint64_t index = 0; stream.Next(&batch); ++index) {
      if (index < work.batches() ||
          (index - work.batches()) % static_cast<uint64_t>(parts) != static_cast<uint64_t>(part)) {
        continue;
      }
      SharedArray<float> weights, bias;
      client_->Wait(client_->Pull(batch.keys, &weights, width, kWeightTable));
      if (use_bias) client_->Wait(client_->Pull(bias_key_, &bias, model_.bias_width(), kBiasTable));
      result->loss +=
          model_.Gradients(batch, weights.data(), use_bias ? bias.data() : zero_bias.data(),
                           &weight_gradients, &bias_gradient);
      if (use_bias) {
        client_->Wait(client_->Push(bias_key_, SharedArray<const float>(std::move(bias_gradient)),
                                    model_.bias_width(), kBiasTable));
      }
      client_->Wait(client_->Push(batch.keys, SharedArray<const float>(std::move(weight_gradients)),
                                  width, kWeightTable));
      weight_gradients = {};
      bias_gradient = {};
      part_examples += batch.batch.rows();
    }
    result->examples += part_examples;
    // The first part also counts what the departed worker read before it left.
    if (part == 0) part_examples += work.examples();
    finished = work;
    finished.set_examples(part_examples);
    have_finished = true;
  }
}

MetricSet Trainer::Evaluate(const std::string& channel, const ModelArtifact* artifact) {
  BatchStream stream(ResolveChannel(channel, 0, 1), options_.reader,
                     static_cast<size_t>(hyperparameters_.mini_batch_size));
  const int width = model_.weight_width();
  const bool use_bias = hyperparameters_.use_bias;
  std::vector<float> bias(model_.bias_width(), 0.0f);
  std::unordered_map<Key, size_t> artifact_rows;  // mixed key -> the feature's row
  if (artifact != nullptr) {
    bias = artifact->bias;
    artifact_rows.reserve(artifact->features.size());
    for (size_t i = 0; i < artifact->features.size(); ++i) {
      artifact_rows[MixKey(artifact->features[i])] = i;
    }
  } else if (use_bias) {
    SharedArray<float> pulled;
    client_->Wait(client_->Pull(bias_key_, &pulled, model_.bias_width(), kBiasTable));
    bias.assign(pulled.begin(), pulled.end());
  }
  std::vector<float> predictions, labels, batch_predictions, local_weights;
  PreparedBatch batch;
  while (stream.Next(&batch)) {
    SharedArray<float> weights;
    const float* rows = nullptr;
    if (artifact != nullptr) {
      // Features the model never saw have zero weights.
      local_weights.assign(batch.keys.size() * width, 0.0f);
      for (size_t k = 0; k < batch.keys.size(); ++k) {
        const auto found = artifact_rows.find(batch.keys[k]);
        if (found == artifact_rows.end()) continue;
        std::copy_n(artifact->weights.begin() + found->second * width, width,
                    local_weights.begin() + k * width);
      }
      rows = local_weights.data();
    } else {
      client_->Wait(client_->Pull(batch.keys, &weights, width, kWeightTable));
      rows = weights.data();
    }
    model_.Predict(batch, rows, bias.data(), &batch_predictions);
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

proto::WorkerCursor Trainer::ReadResumePoint() {
  proto::WorkerCursor cursor;
  auto view = node_->view();
  if (view->resume_checkpoint().empty()) return cursor;
  CheckpointStore store(view->resume_uri());
  const proto::CheckpointManifest manifest = store.ReadManifest(view->resume_checkpoint());
  const std::string where = store.storage()->UriOf(manifest.id());
  if (manifest.batch() > 0 && manifest.num_workers() != view->num_workers()) {
    throw MakeError("checkpoint ", where, " was taken inside epoch ", manifest.epoch(), " by ",
                    manifest.num_workers(), " worker(s); this job has ", view->num_workers(),
                    ": resume it with ", manifest.num_workers(),
                    " worker(s), or from a checkpoint taken between epochs (ckpt-E-000000000)");
  }
  cursor.set_epoch(manifest.epoch());
  for (const proto::WorkerCursor& saved : manifest.workers()) {
    if (saved.rank() == node_->rank() && saved.epoch() == manifest.epoch()) cursor = saved;
  }
  cursor.set_epoch(manifest.epoch());
  if (node_->rank() == 0) state_ = manifest.trainer();
  if (manifest.final()) state_.set_stopped(true);
  LOG(INFO) << "worker " << node_->rank() << " resumes from " << where << " at epoch "
            << cursor.epoch() << " after " << cursor.batches() << " minibatch(es)";
  return cursor;
}

proto::WorkerCursor Trainer::CursorAt(int epoch, uint64_t batches, const EpochResult& so_far) {
  proto::WorkerCursor cursor;
  cursor.set_epoch(epoch);
  cursor.set_batches(batches);
  cursor.set_examples(so_far.examples);
  cursor.set_loss(so_far.loss);
  return cursor;
}

void Trainer::StopForCheckpoint(int epoch, uint64_t batches, const EpochResult& so_far,
                                bool final) {
  node_->Checkpoint(CursorAt(epoch, batches, so_far), node_->rank() == 0 ? &state_ : nullptr, final,
                    kBarrierTimeoutS);
}

void Trainer::Run() {
  const int rank = node_->rank();
  const bool leader = rank == 0;
  state_.set_best_loss(std::numeric_limits<double>::infinity());
  proto::WorkerCursor resume = ReadResumePoint();
  if (node_->has_takeover()) {
    resume = node_->takeover();
    if (resume.epoch() == 0) resume.set_epoch(1);
    LOG(WARNING) << "worker " << rank << " replaces a worker that left: it goes on at epoch "
                 << resume.epoch() << " after " << resume.batches()
                 << " minibatch(es) (its last progress report; minibatches pushed after that "
                    "report are read again)";
  }
  // Time already spent by the run this one resumes.
  const double started = MonotonicSeconds() - state_.elapsed_seconds();
  const int first_epoch = std::max(1, resume.epoch());
  int epoch = first_epoch;
  for (; epoch <= hyperparameters_.epochs && !state_.stopped(); ++epoch) {
    const EpochResult result = TrainEpoch(epoch, resume);
    state_.set_training_seconds(state_.training_seconds() + result.seconds);
    state_.set_pull_wait_seconds(state_.pull_wait_seconds() + result.pull_wait);
    LOG(INFO) << "worker " << rank << " epoch " << epoch << " done: " << result.examples
              << " examples"
              << (result.resumed_examples
                      ? " (" + std::to_string(result.resumed_examples) + " of them before a resume)"
                      : std::string())
              << " in " << std::fixed << std::setprecision(2) << result.seconds << " s ("
              << static_cast<uint64_t>((result.examples - result.resumed_examples) /
                                       std::max(result.seconds, 1e-9))
              << " examples/s), mean training loss "
              << (result.examples ? result.loss / result.examples : 0.0);
    node_->Barrier(kWorkerGroup, kBarrierTimeoutS, "epoch " + std::to_string(epoch) + " counted");
    bool stop = false;
    if (leader) {
      auto& metrics = *state_.mutable_metrics();
      const uint64_t examples = result.epoch_examples;
      state_.set_total_examples(state_.total_examples() + examples);
      metrics["train:examples_per_epoch"] = static_cast<double>(examples);
      metrics["train:epochs"] = epoch;
      std::cout << "epoch " << epoch << ": " << examples << " examples across "
                << node_->view()->num_workers() << " worker(s)";
      if (!options_.validation.empty()) {
        const MetricSet validation = Evaluate(options_.validation);
        for (const auto& [name, value] : validation) metrics["validation:" + name] = value;
        std::cout << "; validation " << FormatMetrics(validation);
        AppendHistory(epoch, MonotonicSeconds() - started, examples, validation);
        const double loss = StoppingLoss(validation);
        const double best = state_.best_loss();
        if (!std::isfinite(best) ||
            loss < best - hyperparameters_.early_stopping_tolerance * std::fabs(best)) {
          state_.set_best_loss(loss);
          state_.set_epochs_without_gain(0);
          // The job's model is its best validation epoch's: dumped now, written at the end.
          if (options_.keep_best_epoch) best_ = BestEpoch{epoch, validation, DumpModel()};
        } else {
          state_.set_epochs_without_gain(state_.epochs_without_gain() + 1);
          if (state_.epochs_without_gain() >= hyperparameters_.early_stopping_patience) {
            stop = true;
            std::cout << "; no gain for " << state_.epochs_without_gain()
                      << " epoch(s): stopping early";
          }
        }
      }
      std::cout << std::endl;
      if (stop) AddToControl(kStopFeature, 1);
      state_.set_elapsed_seconds(MonotonicSeconds() - started);
    }
    node_->Barrier(kWorkerGroup, kBarrierTimeoutS, "epoch " + std::to_string(epoch) + " decided");
    if (ReadControl(kStopFeature) > 0) state_.set_stopped(true);
  }
  if (checkpoints()) {
    // The job's last checkpoint (answered once committed; skipped by the
    // scheduler when the job resumed from it).
    state_.set_elapsed_seconds(MonotonicSeconds() - started);
    StopForCheckpoint(epoch, 0, EpochResult{}, /*final=*/true);
  }
  MetricSet final_metrics(state_.metrics().begin(), state_.metrics().end());
  ReportGate(state_.training_seconds(), state_.pull_wait_seconds(), &final_metrics);
  if (!leader) return;
  // Without a validation channel (or after a resume that saw no gain yet) the
  // model is the last epoch's.
  if (best_.epoch == 0) best_.model = DumpModel();
  if (best_.epoch > 0) {
    for (const auto& [name, value] : best_.validation) final_metrics["validation:" + name] = value;
    final_metrics["train:best_epoch"] = best_.epoch;
    if (best_.epoch != epoch - 1) {
      std::cout << "keeping the model of epoch " << best_.epoch << ", the best on validation"
                << std::endl;
    }
  }
  if (!options_.test.empty()) {
    const MetricSet metrics = Evaluate(options_.test, &best_.model);
    for (const auto& [name, value] : metrics) final_metrics["test:" + name] = value;
    std::cout << "test " << FormatMetrics(metrics) << std::endl;
  }
  // Every worker's examples over the workers' summed training time per worker.
  final_metrics["train:examples_per_second"] =
      state_.training_seconds() > 0
          ? static_cast<double>(state_.total_examples()) / state_.training_seconds()
          : 0;
  if (!options_.model_dir.empty()) {
    best_.model.Write(options_.model_dir);
    LOG(INFO) << "wrote the model (" << best_.model.features.size() << " features) to "
              << options_.model_dir;
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
  node_->Barrier(kWorkerGroup, kBarrierTimeoutS, "gate report");
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
  std::ostringstream line;
  line << std::setprecision(9) << "{\"epoch\": " << epoch << ", \"seconds\": " << seconds
       << ", \"examples\": " << examples;
  for (const auto& [name, value] : metrics) {
    line << ", \"validation:" << name << "\": " << (std::isfinite(value) ? value : 0.0);
  }
  line << "}\n";
  if (IsStorageUri(options_.model_dir)) {
    // Objects cannot be appended to: read the history so far and write it back longer.
    const std::unique_ptr<Storage> storage = OpenStorage(options_.model_dir);
    std::string history;
    if (epoch > 1) {
      try {
        history = storage->Get("history.jsonl");
      } catch (const NotFoundError&) {
      }
    }
    storage->Put("history.jsonl", history + line.str());
    return;
  }
  MakeDirectories(options_.model_dir);
  const std::string path = options_.model_dir + "/history.jsonl";
  std::ofstream out(path, epoch == 1 ? std::ios::trunc : std::ios::app);
  out << line.str();
  if (!out) throw MakeError("cannot write ", path);
}

ModelArtifact Trainer::DumpModel() {
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
  return artifact;
}

void Trainer::WriteMetrics(const MetricSet& metrics) {
  std::ostringstream out;
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
  OpenStorage(options_.model_dir)->Put("metrics.json", out.str());
}

}  // namespace keel
