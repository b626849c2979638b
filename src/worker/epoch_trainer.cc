#include "worker/epoch_trainer.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/time.h"
#include "io/input_split.h"
#include "kv/staleness_gate.h"
#include "worker/barriers.h"
#include "worker/timeline_recorder.h"
#include "worker/training_cursor.h"
#include "worker/training_share.h"

namespace keel {
namespace {

proto::WorkerCursor CursorOf(const EpochResult& result, int epoch, uint64_t batches) {
  return CursorAt(epoch, batches, result.examples, result.losses);
}

}  // namespace

EpochTrainer::EpochTrainer(Node* node, SchedulerLink* scheduler, KVWorker* client,
                           ComputeBackend* model, const Hyperparameters& hyperparameters,
                           const TrainerOptions& options, const proto::TrainerState* state)
    : node_(node),
      scheduler_(scheduler),
      client_(client),
      model_(model),
      hyperparameters_(hyperparameters),
      options_(options),
      state_(state),
      bias_key_(BiasKey()),
      rules_(HealthRuleOptions{options.health_rules}) {}

bool EpochTrainer::checkpoints() const { return node_->view()->checkpoint_every() >= 0; }

EpochResult EpochTrainer::Train(int epoch, const proto::WorkerCursor& resume) {
  Pass pass(epoch, options_.clock_every);
  pass.result.losses.assign(hyperparameters_.num_models, 0.0);
  ResumeInside(resume, &pass);
  JoinEpoch(&pass);
  // Between epochs: a checkpoint (unless this is where the job resumed).
  if (checkpoints() && epoch > 1 && pass.batches == 0 && resume.epoch() != epoch) {
    StopForCheckpoint(scheduler_, CursorOf(pass.result, epoch, 0), *state_, /*final=*/false);
  }
  // A job resumed inside an epoch that another number of workers began has
  // no share of it of its own: it reads the rest of theirs (below).
  if (resume.epoch() != epoch || !resume.no_share()) TrainOwnShare(resume, &pass);
  LeaveEpoch(pass);
  EpochResult result = pass.result;
  ReadOrphanedShares(pass, &result);
  const std::array<double, kHealthTables> ratios = rules_.TakeLargestRatios();
  LOG(INFO) << "worker " << node_->rank() << " epoch " << epoch
            << " health: largest minibatch gradient norm over its running median: weights "
            << ratios[0] << ", bias " << ratios[1] << " (an exploding gradient is above "
            << HealthRuleOptions().explosion_factor << ")";
  return result;
}

void EpochTrainer::TrainOwnShare(const proto::WorkerCursor& resume, Pass* pass) {
  // The check's rows serve one epoch at most (then the cache or the text).
  CheckedRows checked;
  if (checked_ != nullptr) std::swap(checked, *checked_);
  const std::vector<InputSplit> splits =
      TrainingShare(options_, node_->rank(), node_->view()->num_workers(), pipe_passes_);
  // A pass not in the cache reads its own stream, which may appear late.
  if (IsPipePerPass(options_.train) && !pipe_cached_) AwaitStream(splits[0], kPassStreamWaitS);
  BatchStream stream(splits, options_.reader, static_cast<size_t>(hyperparameters_.mini_batch_size),
                     /*prefetch=*/4, scaler_, cache_, &checked);
  SkipPushedBatches(resume, &stream, pass);
  TrainBatches(&stream, pass);
  pipe_cached_ = stream.cached();
  if (IsPipeChannel(options_.train) && !stream.from_cache()) {
    ++pipe_passes_;
    if (IsPipePerPass(options_.train) && cache_ != nullptr && !stream.cached() &&
        pass->epoch < hyperparameters_.epochs) {
      LOG(INFO) << "worker " << node_->rank() << ": the pass over " << splits[0].Describe()
                << " is not cached (see above); the next epoch reads the next pass's stream";
    }
  }
  // A pipe read once: later epochs need its batches cached.
  if (cache_ != nullptr && IsPipeChannel(options_.train) && !IsPipePerPass(options_.train) &&
      !stream.cached() && pass->epoch < hyperparameters_.epochs) {
    throw MakeError("worker ", node_->rank(), ": ", options_.train,
                    " is read once, and its first pass could not be cached (see the warning "
                    "above): raise --cache_max_bytes, give --cache_dir=none to have the pipe "
                    "fed again every epoch, or name each pass's stream with {pass} in its path");
  }
  if (stream.skipped_records() > 0) {
    LOG(WARNING) << "worker " << node_->rank() << " epoch " << pass->epoch << ": skipped "
                 << stream.skipped_records() << " bad records";
  }
}

void EpochTrainer::ResumeInside(const proto::WorkerCursor& resume, Pass* pass) const {
  // A resumed epoch starts after the minibatches the checkpoint holds. A
  // worker that took over a departed worker's rank starts where that one's
  // last progress report left off (all of it, if its share was done or taken).
  const bool resumed = resume.epoch() == pass->epoch && resume.batches() > 0;
  if (!resumed || resume.epoch_done()) return;
  pass->batches = resume.batches();
  pass->result.examples = resume.examples();
  pass->result.resumed_examples = resume.examples();  // read before, not in this process
  pass->result.losses = LossesOf(resume, hyperparameters_.num_models);
}

void EpochTrainer::JoinEpoch(Pass* pass) {
  client_->set_clock(pass->clock.After(pass->batches));
  client_->AnnounceClock(pass->clock.After(pass->batches), /*wait=*/true);
  node_->Barrier(kWorkerGroup, kBarrierTimeoutS, "epoch " + std::to_string(pass->epoch) + " start");
  pass->checkpoint_every = node_->view()->checkpoint_every();
}

void EpochTrainer::SkipPushedBatches(const proto::WorkerCursor& resume, BatchStream* stream,
                                     Pass* pass) {
  PreparedBatch skipped;
  if (resume.epoch() == pass->epoch && resume.epoch_done()) {
    while (stream->Next(&skipped)) ++pass->batches;
    return;
  }
  for (uint64_t b = 0; b < pass->batches; ++b) {
    if (!stream->Next(&skipped)) {
      throw MakeError("worker ", node_->rank(), " cannot resume epoch ", pass->epoch, " after ",
                      pass->batches, " minibatches: its shard has only ", b, " (different data?)");
    }
  }
}

void EpochTrainer::TrainBatches(BatchStream* stream, Pass* pass) {
  pass->begin = MonotonicSeconds();
  pass->last_report = pass->begin;
  MinibatchPipeline pipeline(client_, model_, bias_key_, hyperparameters_.use_bias,
                             options_.minibatches_in_flight, options_.push_filter);
  try {
    TrainBatchesIn(stream, &pipeline, pass);
  } catch (...) {
    // Their arrays are about to go out of scope.
    pipeline.CancelAll();
    throw;
  }
  pass->result.seconds = MonotonicSeconds() - pass->begin;
  if (const PushFilter& filter = pipeline.filter(); filter.enabled()) {
    LOG(INFO) << "worker " << node_->rank() << " epoch " << pass->epoch << ": the push filter sent "
              << filter.rows_sent() << " of " << filter.rows_given()
              << " weight rows with their minibatch (the rest summed, and flushed by now)";
  }
}

void EpochTrainer::TrainBatchesIn(BatchStream* stream, MinibatchPipeline* pipeline, Pass* pass) {
  const bool slow = node_->rank() == options_.slow_rank && options_.slow_factor > 1;
  EpochResult& result = pass->result;
  for (bool have = pipeline->Start(stream); have;) {
    // Each pull ahead carries the clock of the minibatch that reads its rows.
    const bool have_next = pipeline->StartNext(stream, pass->clock, pass->batches);
    const double wait_begin = MonotonicSeconds();
    pipeline->WaitForRows();
    const double compute_begin = MonotonicSeconds();
    result.pull_wait += compute_begin - wait_begin;
    ComputeMinibatch(pipeline, pass->epoch, &result);
    if (slow) SleepLikeAStraggler(compute_begin);
    const double push_begin = MonotonicSeconds();
    result.compute += push_begin - compute_begin;
    // Before a checkpoint the push filter's remainders go with the minibatch,
    // so the pull already ahead of it reads them (as a resumed run does).
    const bool checkpoint_next =
        pass->checkpoint_every > 0 &&
        (pass->batches + 1) % static_cast<uint64_t>(pass->checkpoint_every) == 0;
    pipeline->PushGradients(pass->clock.After(pass->batches + 1), checkpoint_next);
    result.push += MonotonicSeconds() - push_begin;
    ++pass->batches;
    AfterBatch(pipeline->current(), pipeline, pass);
    pipeline->Advance();
    have = have_next;
  }
  const double push_begin = MonotonicSeconds();
  pipeline->WaitForPushes();
  result.push += MonotonicSeconds() - push_begin;
  result.read_wait += pipeline->read_seconds();
}

void EpochTrainer::ComputeMinibatch(MinibatchPipeline* pipeline, int epoch, EpochResult* result) {
  const ModelLosses losses = model_->LastModelLosses(pipeline->ComputeGradients());
  const uint64_t rows = pipeline->current().batch.rows();
  std::vector<double> mean_losses(losses);
  for (double& loss : mean_losses) loss /= static_cast<double>(std::max<uint64_t>(rows, 1));
  const int models = hyperparameters_.num_models;
  MinibatchGradients gradients;
  if (models > 1) {
    left_out_.resize(static_cast<size_t>(models), false);
    const std::vector<MinibatchGradients> each = pipeline->ModelGradientHealth(models);
    for (const HealthRules::Fired& fired :
         rules_.CheckModels(epoch, mean_losses, each, left_out_)) {
      left_out_[static_cast<size_t>(fired.model)] = true;
      LOG(WARNING) << "worker " << node_->rank() << ": " << fired.why << "; model " << fired.model
                   << " is left out from here on (this worker pushes none of its gradients), the "
                      "other models go on";
    }
    // The table's figures are the models' summed, a left-out model's columns
    // as zeroed for the push.
    for (int k = 0; k < models; ++k) {
      const bool out = left_out_[static_cast<size_t>(k)];
      if (out) pipeline->ZeroModel(k, models);
      for (int t = 0; t < kHealthTables; ++t) {
        GradientFigures figures = each[static_cast<size_t>(k)][t];
        if (out) {
          figures.square_sum = 0;
          figures.non_finite = 0;
        }
        gradients[t].Add(figures);
      }
    }
  } else {
    gradients = pipeline->GradientHealth();
    rules_.CheckMinibatch(epoch, mean_losses, gradients);
  }
  AddLosses(losses, &result->losses);
  AddGradients(gradients, &result->gradients);
}

void EpochTrainer::SleepLikeAStraggler(double compute_begin) const {
  const double spent = MonotonicSeconds() - compute_begin;
  std::this_thread::sleep_for(std::chrono::duration<double>(spent * (options_.slow_factor - 1)));
}

void EpochTrainer::AfterBatch(const PreparedBatch& batch, MinibatchPipeline* pipeline, Pass* pass) {
  // Servers this minibatch's pushes did not reach learn the clock too (only
  // needed when servers gate pulls on it).
  if (options_.staleness != StalenessGate::kAsynchronous && pass->clock.AdvancesAt(pass->batches)) {
    client_->AnnounceClock(pass->clock.After(pass->batches), /*wait=*/false);
  }
  pass->result.examples += batch.batch.rows();
  CountBatch(batch, *pass);
  // A resumed pass's cursor counts examples read before this process began:
  // its reading time is not known here.
  const double reading_seconds =
      pass->result.resumed_examples > 0 ? 0 : MonotonicSeconds() - pass->begin;
  scheduler_->SetProgress(CursorOf(pass->result, pass->epoch, pass->batches), reading_seconds);
  if (node_->preempting() || node_->shutdown_requested()) StopForPreemption(pipeline, pass);
  if (pass->checkpoint_every > 0 &&
      pass->batches % static_cast<uint64_t>(pass->checkpoint_every) == 0) {
    // Every push so far applied, none after: the servers copy this state.
    pipeline->WaitForPushes();
    StopForCheckpoint(scheduler_, CursorOf(pass->result, pass->epoch, pass->batches), *state_,
                      /*final=*/false);
  }
  LogProgress(pass);
  if (timeline_) {
    const EpochResult& result = pass->result;
    timeline_->AfterBatch(
        pass->epoch, result.examples - result.resumed_examples,
        result.examples ? result.losses[0] / static_cast<double>(result.examples) : 0);
  }
}

void EpochTrainer::StopForPreemption(MinibatchPipeline* pipeline, Pass* pass) {
  if (checkpoints() && !node_->shutdown_requested()) {
    // Every push so far applied: the checkpoint holds this worker's
    // minibatches up to here. It stops counting for the staleness gate, so
    // that workers held behind it can finish their minibatch in flight too.
    pipeline->WaitForPushes();
    client_->AnnounceClock(kLeaveClock, /*wait=*/true);
    LOG(WARNING) << "worker " << node_->rank() << " stops for the preemption checkpoint at epoch "
                 << pass->epoch << " minibatch " << pass->batches;
    scheduler_->Checkpoint(CursorOf(pass->result, pass->epoch, pass->batches),
                           node_->rank() == 0 ? state_ : nullptr, /*final=*/false, kBarrierTimeoutS,
                           /*preempt=*/true);
  }
  // No checkpoint to wait for (none is possible, or the job is over): what
  // is in flight is dropped (TrainBatches cancels it).
  throw MakeError("preempted: worker ", node_->rank(), " stopped at epoch ", pass->epoch,
                  " after minibatch ", pass->batches);
}

void EpochTrainer::CountBatch(const PreparedBatch& batch, const Pass& pass) const {
  TrainingCounters* counters = options_.counters;
  if (!counters) return;
  const EpochResult& result = pass.result;
  counters->AddBatch(batch.batch.rows());
  counters->epoch.store(pass.epoch, std::memory_order_relaxed);
  if (result.examples > 0) {
    counters->epoch_loss.store(result.losses[0] / result.examples, std::memory_order_relaxed);
  }
}

void EpochTrainer::LogProgress(Pass* pass) const {
  const double time = MonotonicSeconds();
  if (time - pass->last_report < options_.progress_interval_s) return;
  const EpochResult& result = pass->result;
  LOG(INFO) << "worker " << node_->rank() << " epoch " << pass->epoch << ": " << result.examples
            << " examples, "
            << static_cast<uint64_t>((result.examples - result.resumed_examples) /
                                     (time - pass->begin))
            << " examples/s, mean loss " << result.losses[0] / result.examples;
  pass->last_report = time;
}

void EpochTrainer::LeaveEpoch(const Pass& pass) {
  if (checkpoints()) {
    // Checkpoints later in this epoch need not wait for this worker.
    scheduler_->ReportEpochDone(CursorOf(pass.result, pass.epoch, pass.batches));
  }
  // Done with this epoch: stop holding back the workers still in it. Requests
  // outside the minibatch loop (validation, control values) carry clock 0,
  // which the gate neither counts nor holds.
  client_->AnnounceClock(kLeaveClock, /*wait=*/true);
  client_->set_clock(0);
}

void EpochTrainer::ReadOrphanedShares(const Pass& pass, EpochResult* result) {
  const proto::WorkerCursor share = CursorOf(*result, pass.epoch, pass.batches);
  proto::WorkerCursor work, finished;
  int part = 0, parts = 0;
  bool have_finished = false;
  while (scheduler_->TakeOrphanWork(share, have_finished ? &finished : nullptr, part, parts, &work,
                                    &part, &parts, &result->epoch_examples, kBarrierTimeoutS)) {
    if (work.shards() > 0) {
      LOG(WARNING) << "worker " << node_->rank() << " epoch " << pass.epoch
                   << ": reads the rest of "
                   << "the share of worker " << work.rank() << " of the " << work.shards()
                   << " that began this epoch before the resume, from minibatch " << work.batches();
    } else {
      LOG(WARNING) << "worker " << node_->rank() << " epoch " << pass.epoch << ": reads part "
                   << part << " of " << parts << " of worker " << work.rank()
                   << "'s share from minibatch " << work.batches() << " (that worker left)";
    }
    uint64_t part_examples = TrainOrphanedPart(work, part, parts, result);
    result->examples += part_examples;
    // The first part also counts what the departed worker read before it left.
    if (part == 0) {
      part_examples += work.examples();
      result->departed_examples += work.examples();
      AddLosses(LossesOf(work, hyperparameters_.num_models), &result->departed_losses);
    }
    finished = work;
    finished.set_examples(part_examples);
    have_finished = true;
  }
}

uint64_t EpochTrainer::TrainOrphanedPart(const proto::WorkerCursor& work, int part, int parts,
                                         EpochResult* result) {
  // A share of the workers that began a resumed epoch: of their number.
  // (Of a host's own share, with split_within_host: this host's files.)
  const int shards = work.shards() > 0 ? work.shards() : node_->view()->num_workers();
  BatchStream stream(TrainingShare(options_, work.rank(), shards), options_.reader,
                     static_cast<size_t>(hyperparameters_.mini_batch_size),
                     /*prefetch=*/4, scaler_);
  stream.Select(work.batches(), part, parts);
  MinibatchPipeline pipeline(client_, model_, bias_key_, hyperparameters_.use_bias,
                             options_.minibatches_in_flight, options_.push_filter);
  try {
    return TrainOrphanedBatches(work.epoch(), &stream, &pipeline, result);
  } catch (...) {
    pipeline.CancelAll();  // their arrays are about to go out of scope
    throw;
  }
}

uint64_t EpochTrainer::TrainOrphanedBatches(int epoch, BatchStream* stream,
                                            MinibatchPipeline* pipeline, EpochResult* result) {
  const EpochClock outside = EpochClock::Outside();
  uint64_t examples = 0;
  uint64_t index = 0;  // of the minibatches this part reads
  for (bool have = pipeline->Start(stream); have; ++index) {
    const bool have_next = pipeline->StartNext(stream, outside, index);
    pipeline->WaitForRows();
    ComputeMinibatch(pipeline, epoch, result);
    pipeline->PushGradients(outside.After(index + 1));
    const uint64_t rows = pipeline->current().batch.rows();
    examples += rows;
    if (options_.counters) options_.counters->AddBatch(rows);
    pipeline->Advance();
    have = have_next;
  }
  pipeline->WaitForPushes();
  return examples;
}

}  // namespace keel
