// EpochTrainer: one worker's pass over its share of an epoch of the training
// channel, for the Trainer.
//
// The worker joins the epoch's staleness-gate clock and meets the others at a
// barrier; a resumed epoch skips the minibatches its checkpoint holds. Every
// minibatch then goes through the MinibatchPipeline (pull, compute, push,
// overlapped), and the worker reports its progress, stops at the checkpoints
// the view asks for, and logs its throughput now and then. At the end of its
// share it leaves the gate and, until every rank's share is done, reads the
// parts of departed workers' shares the scheduler hands it.
#ifndef KEEL_WORKER_EPOCH_TRAINER_H_
#define KEEL_WORKER_EPOCH_TRAINER_H_

#include <cstdint>
#include <vector>

#include "checkpoint.pb.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "worker/batch_stream.h"
#include "worker/compute_backend.h"
#include "worker/data_statistics.h"
#include "worker/epoch_clock.h"
#include "worker/epoch_result.h"
#include "worker/health_rules.h"
#include "worker/hyperparameters.h"
#include "worker/minibatch_pipeline.h"
#include "worker/scheduler_link.h"
#include "worker/shard_check.h"
#include "worker/trainer_options.h"
#include "worker/training_loss.h"

namespace keel {

class TimelineRecorder;

class EpochTrainer {
 public:
  // Every pointer must outlive the trainer. `state` is the job's state as
  // worker 0 keeps it, which its checkpoints carry.
  EpochTrainer(Node* node, SchedulerLink* scheduler, KVWorker* client, ComputeBackend* model,
               const Hyperparameters& hyperparameters, const TrainerOptions& options,
               const proto::TrainerState* state);

  // Trains this worker's share of `epoch`, starting after `resume`'s
  // minibatches when it is for this epoch (a resumed job, or a worker that
  // took over a departed one's rank). Throws Error on bad data, a failed
  // request, a failed checkpoint or a barrier timeout.
  EpochResult Train(int epoch, const proto::WorkerCursor& resume);

  // Minibatches are scaled by `scaler` (null: not at all) as they are
  // prepared; it must outlive the trainer's use of it.
  void set_scaler(const DataScaler* scaler) { scaler_ = scaler; }
  // This worker's share is read through `cache` (null: from the text
  // every epoch), which must outlive the trainer's use of it.
  void set_cache(BatchCache* cache) { cache_ = cache; }
  // The next epoch of this worker's own share takes its rows from `checked`
  // (the shard check's, worker/shard_check.h) if they are its splits', and
  // empties it: it must outlive that epoch.
  void set_checked_rows(CheckedRows* checked) { checked_ = checked; }
  // Each minibatch is reported to `timeline` (null: none), which must
  // outlive the trainer's use of it.
  void set_timeline(TimelineRecorder* timeline) { timeline_ = timeline; }

 private:
  // One pass's state, shared by its steps.
  struct Pass {
    Pass(int epoch, int clock_every) : epoch(epoch), clock(epoch, clock_every) {}
    const int epoch;
    const EpochClock clock;
    int checkpoint_every = -1;  // the view's: minibatches between checkpoints
    uint64_t batches = 0;       // minibatches of the epoch pushed so far
    double begin = 0;           // when this process started its minibatches
    double last_report = 0;     // the last progress line
    EpochResult result;
  };

  // Checkpoints are on (the view says how often workers stop for one).
  bool checkpoints() const;
  // Where `resume` puts this worker inside `pass`'s epoch: its minibatches,
  // examples and loss so far.
  void ResumeInside(const proto::WorkerCursor& resume, Pass* pass) const;
  // Joins the epoch's clock and meets the other workers at its start.
  void JoinEpoch(Pass* pass);
  // This worker's own share of `pass`'s epoch, from where `resume` puts it.
  void TrainOwnShare(const proto::WorkerCursor& resume, Pass* pass);
  // Reads past the minibatches pushed before a resume (all of them if this
  // share was already done).
  void SkipPushedBatches(const proto::WorkerCursor& resume, BatchStream* stream, Pass* pass);
  // Every minibatch left in `stream` through the pipeline.
  void TrainBatches(BatchStream* stream, Pass* pass);
  void TrainBatchesIn(BatchStream* stream, MinibatchPipeline* pipeline, Pass* pass);
  // The current minibatch's gradients, once its rows are in: checks the
  // health rules (throws Error when one stops the job; of several models,
  // leaves out those a rule fires for, zeroing their gradients from then
  // on), then adds its losses (summed, per model) and gradients to
  // `*result` as a minibatch of `epoch`.
  void ComputeMinibatch(MinibatchPipeline* pipeline, int epoch, EpochResult* result);
  // A straggler on purpose: sleeps (slow_factor - 1) times the compute time
  // since `compute_begin`.
  void SleepLikeAStraggler(double compute_begin) const;
  // After a minibatch is pushed: announces the clock, reports progress,
  // stops at a checkpoint point, and logs a progress line when due.
  void AfterBatch(const PreparedBatch& batch, MinibatchPipeline* pipeline, Pass* pass);
  void LogProgress(Pass* pass) const;
  // The job is being preempted (or was ended): with checkpoints on (and the
  // job not over yet) this worker stops for the preemption checkpoint once
  // its pushes are applied; either way it then throws Error: it trains no
  // further.
  [[noreturn]] void StopForPreemption(MinibatchPipeline* pipeline, Pass* pass);
  // Adds a pushed minibatch to the metrics' counters (TrainerOptions::counters).
  void CountBatch(const PreparedBatch& batch, const Pass& pass) const;
  // Done with the epoch's share: reports it and leaves the gate.
  void LeaveEpoch(const Pass& pass);
  // At the end of this worker's share: waits until every rank's share is
  // done, reading the parts of departed workers' shares the scheduler hands
  // over meanwhile.
  void ReadOrphanedShares(const Pass& pass, EpochResult* result);
  // Part `part` of `parts` of a departed worker's share from `work`'s
  // minibatch on, through the MinibatchPipeline at clock 0 (outside the
  // gate: this worker has left the epoch's), its pushes applied when it
  // returns. Adds the losses and gradients to `*result`; returns the
  // examples read.
  uint64_t TrainOrphanedPart(const proto::WorkerCursor& work, int part, int parts,
                             EpochResult* result);
  uint64_t TrainOrphanedBatches(int epoch, BatchStream* stream, MinibatchPipeline* pipeline,
                                EpochResult* result);

  Node* node_;
  SchedulerLink* scheduler_;
  KVWorker* client_;
  ComputeBackend* model_;
  Hyperparameters hyperparameters_;
  TrainerOptions options_;
  const proto::TrainerState* state_;
  SharedArray<const Key> bias_key_;
  const DataScaler* scaler_ = nullptr;
  BatchCache* cache_ = nullptr;
  // Passes read from a training pipe given once per pass (the next one's
  // number: SageMaker's CHANNEL_N).
  int pipe_passes_ = 0;
  bool pipe_cached_ = false;  // the cache holds the last pass read
  CheckedRows* checked_ = nullptr;
  HealthRules rules_;
  // Of several models, those a health rule left out (HealthRules::CheckModels).
  std::vector<bool> left_out_;
  TimelineRecorder* timeline_ = nullptr;
};

}  // namespace keel

#endif  // KEEL_WORKER_EPOCH_TRAINER_H_
