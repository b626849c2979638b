// Trainer: a worker's training loop for the built-in jobs.
//
// Each worker reads its shard of the training channel, and for every
// minibatch pulls the rows of the batch's features (the pull for the next
// batch is in flight while this one computes), computes the mean loss's
// gradients on its compute backend (CPU or CUDA) and pushes them; the servers apply them with their
// optimizer. After each epoch the workers meet at a barrier; worker 0 scores
// the validation channel, decides on early stopping and tells the others
// through the servers' control table. At the end worker 0 scores the test
// channel and writes the model artifact and metrics.json to --model_dir.
#ifndef KEEL_WORKER_TRAINER_H_
#define KEEL_WORKER_TRAINER_H_

#include <memory>
#include <string>

#include "io/readers.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "kv/staleness_gate.h"
#include "models/metrics.h"
#include "worker/compute_backend.h"
#include "worker/hyperparameters.h"
#include "worker/model_artifact.h"

namespace keel {

struct TrainerOptions {
  std::string train;       // channel: file, folder, or pipe:PATH
  std::string validation;  // optional
  std::string test;        // optional
  ReaderOptions reader;
  std::string model_dir;            // where worker 0 writes the artifact and metrics.json; optional
  std::string hyperparameter_json;  // recorded in the artifact
  double progress_interval_s = 5;
  // Consistency: a pull waits until every worker is at most `staleness`
  // clocks behind it (StalenessGate::kAsynchronous: never). The clock
  // advances every `clock_every` minibatches.
  int64_t staleness = StalenessGate::kAsynchronous;
  int clock_every = 1;
  // A straggler on purpose: worker `slow_rank` takes `slow_factor` times as
  // long per minibatch (it sleeps the difference).
  int slow_rank = -1;
  double slow_factor = 1;
  // The compute backend (MakeComputeBackend): "cpu" or "cuda:N", and the CPU's threads.
  std::string device = "cpu";
  int threads = 1;
  // Worker 0 dumps the weights whenever the validation loss improves; the
  // artifact, metrics.json and the test channel's scores are then the best
  // validation epoch's instead of the last one's. Not carried by checkpoints:
  // a resumed job keeps the last epoch unless one after the resume beats the
  // best before it.
  bool keep_best_epoch = false;
};

class Trainer {
 public:
  Trainer(Node* node, KVWorker* client, const Hyperparameters& hyperparameters,
          TrainerOptions options);

  // Trains every epoch (or until early stopping). Throws Error on bad data,
  // a failed request or a failed write.
  void Run();

  // Scores a channel (worker 0's job) with the servers' current weights, or
  // with `artifact`'s if given. Metric names are SageMaker's, without the
  // channel prefix.
  MetricSet Evaluate(const std::string& channel, const ModelArtifact* artifact = nullptr);

 private:
  struct EpochResult {
    uint64_t examples = 0;
    double loss = 0;
    double seconds = 0;
    double pull_wait = 0;  // blocked on the next minibatch's rows
    uint64_t epoch_examples = 0;  // read by every worker in the epoch
    uint64_t resumed_examples = 0;  // of `examples`, read before a resume or takeover
  };
  // Trains `epoch`, starting after `resume`'s minibatches when it is for this
  // epoch (a resumed job).
  EpochResult TrainEpoch(int epoch, const proto::WorkerCursor& resume);
  // At the end of this worker's share of `epoch`: waits until every rank's
  // share is done, reading the parts of departed workers' shares the
  // scheduler hands over meanwhile.
  void ReadOrphanedShares(int epoch, uint64_t batches, EpochResult* result);
  // Checkpoints are on (the view says how often workers stop for one).
  bool checkpoints() const { return node_->view()->checkpoint_every() >= 0; }
  // Where this worker is: `batches` minibatches into `epoch`.
  static proto::WorkerCursor CursorAt(int epoch, uint64_t batches, const EpochResult& so_far);
  // Stops at a checkpoint point; the leading worker brings the job's state.
  void StopForCheckpoint(int epoch, uint64_t batches, const EpochResult& so_far, bool final);
  // Reads the checkpoint the view says to resume from: this worker's cursor
  // (epoch 0 if none) and, on the leading worker, the job's state.
  proto::WorkerCursor ReadResumePoint();
  // Adds `value` to control key `feature` on the servers (a count or a flag,
  // kept as two floats of 20 bits so sums stay exact). Blocks until applied.
  void AddToControl(uint64_t feature, uint64_t value);
  uint64_t ReadControl(uint64_t feature);
  // Sums every worker's gate figures through the control table; worker 0
  // adds them to `metrics`.
  void ReportGate(double training_seconds, double pull_wait_seconds, MetricSet* metrics);
  // Worker 0: one line per epoch in <model_dir>/history.jsonl (wall seconds
  // since the start, examples, validation metrics).
  void AppendHistory(int epoch, double seconds, uint64_t examples, const MetricSet& metrics);
  // Worker 0: every row of the servers' tables, as an artifact.
  ModelArtifact DumpModel();
  void WriteMetrics(const MetricSet& metrics);

  Node* node_;
  KVWorker* client_;
  Hyperparameters hyperparameters_;
  TrainerOptions options_;
  std::unique_ptr<ComputeBackend> backend_;
  ComputeBackend& model_;
  SharedArray<const Key> bias_key_;
  // The job's state as checkpoints carry it (kept current by the leader).
  proto::TrainerState state_;
  // Worker 0: the epoch with the best validation loss so far (0: none yet),
  // its validation metrics and its weights (TrainerOptions::keep_best_epoch).
  struct BestEpoch {
    int epoch = 0;
    MetricSet validation;
    ModelArtifact model;
  };
  BestEpoch best_;
};

}  // namespace keel

#endif  // KEEL_WORKER_TRAINER_H_
