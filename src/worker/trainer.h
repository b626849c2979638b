// Trainer: a worker's training loop for the built-in jobs.
//
// Each worker reads its shard of the training channel, and for every
// minibatch pulls the rows of the batch's features (the pulls for the next
// --minibatches_in_flight batches are in flight while this one computes), computes the mean loss's
// gradients on its compute backend (CPU or CUDA) and pushes them; the servers apply them with their
// optimizer. After each epoch the workers meet at a barrier; worker 0 scores
// the validation channel, decides on early stopping and tells the others
// through the servers' control table. At the end worker 0 scores the test
// channel and writes the model artifact and metrics.json to --model_dir.
//
// The mechanisms live in their own files: EpochTrainer (one epoch's share,
// through the MinibatchPipeline), Evaluator, early_stopping.h,
// training_cursor.h (resume points and checkpoints), ControlTable,
// gate_report.h, model_dump.h and metrics_files.h.
#ifndef KEEL_WORKER_TRAINER_H_
#define KEEL_WORKER_TRAINER_H_

#include <array>
#include <memory>
#include <optional>
#include <string>

#include "io/readers.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "kv/staleness_gate.h"
#include "models/metrics.h"
#include "models/threshold_selection.h"
#include "worker/batch_cache.h"
#include "worker/compute_backend.h"
#include "worker/control_table.h"
#include "worker/data_statistics.h"
#include "worker/epoch_trainer.h"
#include "worker/evaluator.h"
#include "worker/hyperparameters.h"
#include "worker/model_artifact.h"
#include "worker/scheduler_link.h"
#include "worker/shard_check.h"
#include "worker/timeline_recorder.h"
#include "worker/trainer_options.h"
#include "worker/trivial_predictor.h"
#include "worker/training_health.h"

namespace keel {

class Trainer {
 public:
  Trainer(Node* node, SchedulerLink* scheduler, KVWorker* client,
          const Hyperparameters& hyperparameters, TrainerOptions options);

  // Trains every epoch (or until early stopping). Throws Error on bad data,
  // a failed request, a failed write, or a training health rule that fired
  // (worker/health_rules.h).
  void Run();

 private:
  // Before the first minibatch, every worker: checks the labels (and every
  // record) of its shard, then takes the data statistics from the same
  // sample of the training channel (worker/data_statistics.h) and has the
  // minibatches scaled and the loss weighted by them. A resumed job computes
  // the same statistics again.
  void PrepareData(int first_epoch);
  // Reads this worker's shard once (CheckShard; unless the batch cache holds
  // it, checked when written) and returns its rows; throws its Error,
  // prefixed "before the first minibatch: ".
  uint64_t CheckTrainingShard();
  // Opens the share's batch cache as TrainerOptions::cache_dir says. The
  // default cache (a temporary folder, removed at the end) is not made for a
  // run of one epoch from `first_epoch`: no later epoch would read it.
  void OpenCache(int first_epoch);
  // The rows the statistics come from: a sample of the channel's files (with
  // the channel's rows), or a pipe's first rows (HoldPipeHead; rows unknown).
  ChannelSample StatisticsSample() const;
  // A pipe, read once: its first num_point_for_scaler rows, read into
  // checked_ for the first epoch to train on before the rest of the stream
  // (nothing read is lost). Throws its reader's Error, prefixed "before the
  // first minibatch: ".
  void HoldPipeHead();
  // Checkpoints are on (the view says how often workers stop for one).
  bool checkpoints() const { return node_->view()->checkpoint_every() >= 0; }
  // Every worker, after its share of `epoch`: adds its time and its training
  // loss to the job's figures and logs the epoch's line.
  void CountEpoch(int epoch, const EpochResult& result);
  // Worker 0, once every worker has counted `epoch` (`examples` in all):
  // records the epoch's figures (train:objective_loss among them), validates,
  // selects the best of the job's models, appends the epoch to
  // history.jsonl, and tells the others whether to stop. `started`: when the
  // job started, resumed runs included.
  void DecideEpoch(int epoch, uint64_t examples, double started);
  // Scores every model on the validation channel after `epoch`, selects the
  // best (into `*selected`) and judges it; true to stop. Adds the
  // validation:* metrics (the selected model's; every model's as
  // model_<k>:validation:* when there are several) to `figures`, the epoch's
  // history line.
  bool ValidateEpoch(int epoch, MetricSet* figures, int* selected);
  // Worker 0, after `epoch` is counted: the epoch's training health, recorded
  // in the job's metrics (health:*, for metrics.json) and in
  // TrainerOptions::health; returns it as history.jsonl's `health` object.
  std::string RecordHealth(int epoch);
  // Each health table's weights per row (0: a table the job does not have).
  std::array<int, kHealthTables> HealthWidths() const;
  // Records `figures` in the job's metrics (state_) and in the epoch's line.
  void Record(const MetricSet& named, MetricSet* figures);
  // Worker 0, at the end: records the trivial predictor's figures on each
  // channel scored (trivial:CHANNEL:NAME, and trivial:CHANNEL:worse, how many
  // of the model's figures there are worse) and warns, naming the model and
  // the figures, when the kept model is worse than it.
  void GuardAgainstTrivial(MetricSet* final_metrics);
  // Worker 0, at the end: picks the model (the best validation epoch's or the
  // last one's, `last_epoch`; of several models the selected one), scores the
  // test channel with it, and writes the artifact and metrics.json.
  void FinishJob(int last_epoch, MetricSet* final_metrics);
  void ChooseModel(int last_epoch, MetricSet* final_metrics);
  // Worker 0, at the end: sets the chosen model's decision threshold by the
  // selection criterion (worker/model_selection.h), on the validation channel
  // or else the training channel, at most --num_calibration_samples rows, and
  // adds what was chosen to `final_metrics`.
  void TuneThreshold(MetricSet* final_metrics);
  // Model k of the servers' current weights, as an artifact (the data
  // statistics folded in).
  ModelArtifact DumpServersModel(int k);
  // Every model of the servers' current weights, each an artifact with the
  // data statistics folded in.
  std::vector<ModelArtifact> DumpFoldedModels();
  // Worker 0, a new best epoch (best_): its model kept in the checkpoint
  // store for a resume, and named in state_ (worker/best_epoch_store.h). A
  // failure is logged; the state then names no best epoch.
  void KeepBestForResume();
  // Worker 0, a resumed job: best_ from the model and figures the state
  // names; unreadable, it is said on the terminal and the job goes on without.
  void RestoreBestEpoch();
  // Model k of `all` (a dump of every model), with the data statistics folded in.
  ModelArtifact FoldedModel(const ModelArtifact& all, int k) const;
  // Folds the statistics and the reader's settings into `model`.
  void Fold(ModelArtifact* model) const;

  Node* node_;
  SchedulerLink* scheduler_;
  KVWorker* client_;
  Hyperparameters hyperparameters_;
  TrainerOptions options_;
  std::unique_ptr<ComputeBackend> backend_;
  ComputeBackend& model_;
  // One model's backend, for artifacts (with several models; else null and
  // backend_ serves).
  std::unique_ptr<ComputeBackend> one_model_;
  ControlTable control_;
  Evaluator evaluator_;
  // How the validation channel is read: its rows, or the training channel's
  // held-out rows (TrainerOptions::holdout).
  ReaderOptions validation_reader_;
  // The job's state as checkpoints carry it (kept current by the leader).
  proto::TrainerState state_;
  EpochTrainer epoch_trainer_;
  // Worker 0: the epoch with the best validation loss so far (0: none yet),
  // its validation metrics and its weights (TrainerOptions::keep_best_epoch).
  struct BestEpoch {
    int epoch = 0;
    MetricSet validation;  // the selected model's
    MetricSet figures;     // the epoch's history line: every model's figures
    ModelArtifact model;   // the selected model alone
    // The selected model's threshold choice on all `threshold_rows` rows of
    // the validation channel, which TuneThreshold takes instead of scoring
    // them again (none when the channel holds more than
    // --num_calibration_samples rows: those are scored again, up to that many).
    std::optional<ThresholdChoice> threshold;
    size_t threshold_rows = 0;
  };
  BestEpoch best_;
  // The statistics training uses, folded into every model it dumps.
  DataStatistics statistics_;
  // The best constant prediction of the sample's labels, and its figures on
  // each channel scored ("validation", "test"): the guard's yardstick.
  TrivialPredictor trivial_;
  std::map<std::string, MetricSet> trivial_figures_;
  std::unique_ptr<DataScaler> scaler_;
  // The folder of the share's batch cache when it is a temporary one, and the cache.
  std::unique_ptr<TemporaryCacheFolder> cache_folder_;
  std::unique_ptr<BatchCache> cache_;
  // The rows the shard check read, for the first epoch (then emptied).
  CheckedRows checked_;
  // Worker 0: the servers' tables at the end of the epoch before.
  std::array<TableRows, kHealthTables> rows_before_;
  // This worker's part of the job's timeline (started by Run).
  std::unique_ptr<TimelineRecorder> timeline_;
  // The examples of this worker's share of an epoch (0: not counted), for
  // the job's progress display.
  uint64_t share_examples_ = 0;
};

}  // namespace keel

#endif  // KEEL_WORKER_TRAINER_H_
