// JobProgress: the whole job's progress, as the scheduler hears it.
//
// Every worker's heartbeat carries its cursor (epoch, examples of the epoch
// read so far, their summed loss) and a ProgressReport (the job's epochs, the
// examples of its share); the leading worker adds, in PROGRESS messages, the
// figures of each epoch it decided (validation metrics, early stopping) and
// the job's outcome (final metrics, the model's folder). JobProgress checks
// each report's bounds (CheckProgressReport) and keeps per worker and per job
// what a display needs: `keel scheduler --progress_records` prints it for
// `keel launch` to render.
//
// Thread-safe: its methods may be called from any thread.
#ifndef KEEL_SCHEDULER_JOB_PROGRESS_H_
#define KEEL_SCHEDULER_JOB_PROGRESS_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint.pb.h"
#include "keel.pb.h"
#include "models/metrics.h"
#include "scheduler/progress_estimate.h"

namespace keel {

// Bounds on what a report may carry; beyond them it is refused whole.
constexpr int kMaxProgressEpochs = 1000000;
constexpr int kMaxProgressMetrics = 256;
constexpr size_t kMaxProgressNameBytes = 200;
constexpr size_t kMaxProgressPathBytes = 4096;
constexpr double kMaxProgressSeconds = 1e10;

// Why `report` (and `cursor`, when given) from the worker of `rank` is
// refused ("" if it is taken): epochs out of [0, kMaxProgressEpochs], an
// epoch's figures or the outcome from another worker than rank 0, a decided
// epoch out of [1, epochs] or its seconds not in [0, kMaxProgressSeconds],
// more than kMaxProgressMetrics metrics, a name or the model's folder too
// long, a cursor's epoch out of bounds.
std::string CheckProgressReport(int rank, const proto::WorkerCursor* cursor,
                                const proto::ProgressReport& report);

// One worker as its latest reports left it.
struct WorkerProgress {
  int rank = 0;
  int node_id = 0;
  int epoch = 0;                   // 1-based; 0: no report yet
  uint64_t examples = 0;           // of `epoch`, read so far
  bool epoch_done = false;         // its share of `epoch` is read
  bool reading = false;            // it read examples since its previous report
  double examples_per_second = 0;  // while it reads: over its reading time, or between reports
  double reading_seconds = 0;      // its latest report's time reading `epoch`; 0: not said
  double rate_heard = -1;          // when a report saying its reading time came (-1: never)
  double loss = 0;                 // mean training loss of `examples` (model 0)
  uint64_t share_examples = 0;     // examples in its share; 0: not known
  MetricSet validation;            // the leading worker: the latest epoch's validation:*
  double last_update_wall = 0;     // WallSeconds of its latest report
};

// One epoch as the leading worker decided it.
struct DecidedEpoch {
  int epoch = 0;
  uint64_t examples = 0;        // every worker's
  uint64_t total_examples = 0;  // every epoch's so far, this one too (0: not reported)
  double seconds = 0;           // into the job when it was decided (the leading worker's clock)
  MetricSet metrics;            // validation:*, train:objective_loss, ...
  bool stop = false;            // early stopping: the job's last epoch
};

// The job's end as the leading worker reported it.
struct JobEnd {
  int epochs_run = 0;
  bool stopped_early = false;
  MetricSet metrics;  // metrics.json's
  std::string model_dir;
};

// Everything JobProgress knows, at one moment.
struct ProgressSnapshot {
  uint64_t version = 0;                 // grows with every change
  int epochs = 0;                       // the job's epochs; 0: not reported yet
  int epoch = 0;                        // the epoch workers are in (the highest reported)
  uint64_t epoch_done = 0;              // examples of `epoch` read by every worker so far
  uint64_t epoch_expected = 0;          // examples in an epoch; 0: not known yet
  // The job's while it reads: the sum of its workers' rates over their
  // reading time, or (workers not saying it) smoothed by a RateMeter.
  double examples_per_second = 0;
  uint64_t examples_read = 0;           // in the workers' reports, every epoch
  double training_loss = 0;             // mean over `epoch_done` (model 0)
  ProgressFigures figures;              // the epoch's share done, the time left
  double seconds = 0;                   // since the first report
  std::vector<WorkerProgress> workers;  // by rank
  std::vector<DecidedEpoch> decided;    // in order
  std::optional<JobEnd> end;
};

class JobProgress {
 public:
  // A worker's rate counts in the job's while reports saying its reading
  // time keep coming at least this often.
  static constexpr double kRateHeardWithinS = 5;

  explicit JobProgress(int num_workers);

  // A heartbeat or PROGRESS message from the worker `node_id` of `rank`,
  // received at `now` (MonotonicSeconds). `reading_seconds`: how long the
  // worker has been reading the cursor's epoch (0: not known). Returns why it
  // was refused (CheckProgressReport), or "" once taken.
  std::string OnReport(int node_id, int rank, const proto::WorkerCursor* cursor,
                       double reading_seconds, const proto::ProgressReport& report, double now);

  ProgressSnapshot Snapshot(double now) const;

  // Blocks until the version passes `seen` or `timeout_s` passes; returns the
  // version.
  uint64_t WaitForChange(uint64_t seen, double timeout_s) const;

 private:
  void TakeCursor(WorkerProgress* worker, const proto::WorkerCursor& cursor,
                  double reading_seconds, double now);
  // The job's examples per second at `now` (ProgressSnapshot).
  double RateLocked(double now) const;
  // Adds `read` examples, read from `since` to `now`, to the job's rate, or
  // pauses it while no worker reads.
  void MeterRate(uint64_t read, double since, double now);
  void TakeDecided(WorkerProgress* worker, const proto::EpochFigures& figures);
  void TakeOutcome(const proto::JobOutcome& outcome);
  // Examples in an epoch: the last decided epoch's, else the sum of every
  // rank's share when all are known, else 0.
  uint64_t EpochExpectedLocked() const;
  // The wall time per example of the decided epochs (0: none decided): from
  // the first decided epoch to the last when there are two or more, else the
  // first's own (which counts the job's start).
  double SecondsPerExampleLocked() const;

  const int num_workers_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  uint64_t version_ = 0;
  int epochs_ = 0;
  double first_report_ = -1;               // MonotonicSeconds; -1: none yet
  std::map<int, WorkerProgress> workers_;  // by rank
  std::map<int, double> report_times_;     // rank -> its latest cursor's arrival
  RateMeter rate_;
  uint64_t examples_read_ = 0;
  std::vector<DecidedEpoch> decided_;
  std::optional<JobEnd> end_;
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_JOB_PROGRESS_H_
