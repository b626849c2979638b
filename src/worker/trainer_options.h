// TrainerOptions: what a worker's training loop (Trainer) is told beyond the
// hyperparameters: its channels, where its outputs go, consistency, the
// compute backend.
#ifndef KEEL_WORKER_TRAINER_OPTIONS_H_
#define KEEL_WORKER_TRAINER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "io/readers.h"
#include "kv/staleness_gate.h"
#include "worker/push_filter.h"
#include "worker/training_counters.h"

namespace keel {

class LatestHealth;  // worker/training_health.h

struct TrainerOptions {
  std::string train;       // channel: file, folder, or pipe:PATH
  std::string validation;  // optional
  // A share of the training rows held out as the validation channel when
  // there is none (ReaderOptions::holdout_share; 0: none).
  double holdout = 0.0;
  std::string test;        // optional
  // 0: the training channel is the whole job's, split among every worker.
  // N > 0: it is the host's own share of the files (SageMaker's
  // ShardedByS3Key), split among the N workers the host runs, of
  // consecutive ranks (worker/training_share.h).
  int split_within_host = 0;
  ReaderOptions reader;
  // Where the worker keeps its share's prepared minibatches after the first
  // pass, for later epochs to read instead of the text (worker/batch_cache.h):
  // a folder (kept), "" for a folder under the system's temporary folder
  // removed at the end, or "none". The file is at most `cache_max_bytes`.
  std::string cache_dir;
  uint64_t cache_max_bytes = uint64_t{4} << 30;
  std::string model_dir;            // where worker 0 writes the artifact and metrics.json; optional
  std::string hyperparameter_json;  // recorded in the artifact
  double progress_interval_s = 5;
  // Consistency: a pull waits until every worker is at most `staleness`
  // clocks behind it (StalenessGate::kAsynchronous: never). The clock
  // advances every `clock_every` minibatches.
  int64_t staleness = StalenessGate::kAsynchronous;
  int clock_every = 1;
  // Minibatches a worker pulls ahead of the one it computes, and whose pushes
  // may be in flight at once (worker/minibatch_pipeline.h): above 1 only for
  // asynchronous training.
  int minibatches_in_flight = 1;
  // The weights' push filter (worker/push_filter.h; off unless its
  // threshold is above 0): its remainders are flushed before every
  // checkpoint this worker stops for, and at the end of its share of each
  // epoch (and of each departed worker's part it reads).
  PushFilterOptions push_filter;
  // A straggler on purpose: worker `slow_rank` takes `slow_factor` times as
  // long per minibatch (it sleeps the difference).
  int slow_rank = -1;
  double slow_factor = 1;
  // The compute backend (MakeComputeBackend): "cpu" or "cuda:N", and the CPU's threads.
  std::string device = "cpu";
  int threads = 1;
  // Worker 0 dumps the weights whenever the validation loss improves; the
  // artifact, metrics.json and the test channel's scores are then the best
  // validation epoch's instead of the last one's. With checkpoints, that
  // model is kept in the checkpoint store, and a resumed job carries the best
  // epoch before the resume (worker/best_epoch_store.h).
  bool keep_best_epoch = false;
  // Every worker stops the job when a minibatch breaks a training health
  // rule (worker/health_rules.h).
  bool health_rules = true;
  // Where worker 0 publishes each epoch's training health for readers on
  // other threads (a metrics endpoint); null: nowhere. Must outlive the
  // trainer.
  LatestHealth* health = nullptr;
  // Where the training loop keeps its running figures for metrics; none if null.
  TrainingCounters* counters = nullptr;
};

}  // namespace keel

#endif  // KEEL_WORKER_TRAINER_OPTIONS_H_
