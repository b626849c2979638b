// JobRecord: everything a job recorded about itself in its model folder, read
// back for `keel report`: model.json (the job and its hyperparameters),
// metrics.json (the final metrics), history.jsonl (a line per epoch: every
// model's figures, and a per-table "health" object when the job wrote one)
// and the timeline (timeline/*.jsonl: worker samples and epoch lines, the
// scheduler's membership and checkpoint lines, the launcher's process and
// fault lines; schema in docs/ARCHITECTURE.md, Observability).
//
// Any of these may be missing (a job still running, a job without
// validation, roles started by hand): the record says what it found. A line
// that is not what the schema says throws Error naming the file and line.
#ifndef KEEL_REPORT_JOB_RECORD_H_
#define KEEL_REPORT_JOB_RECORD_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace keel {

// One history.jsonl line.
struct HistoryEpoch {
  int epoch = 0;
  double seconds = 0;                     // since the trainer started
  std::map<std::string, double> figures;  // "train:objective_loss", "model_1:validation:auc", ...
  std::map<std::string, std::map<std::string, double>> health;  // table -> figure -> value
};

// A worker's "sample" line.
struct WorkerSample {
  double time = 0;  // Unix seconds
  int epoch = 0;
  double examples = 0;  // read by this process so far
  double examples_per_second = 0;
  double loss = 0;  // the epoch's mean training loss so far
};

// A worker's "epoch" line: its share of one epoch.
struct WorkerEpoch {
  double time = 0;
  int epoch = 0;
  double seconds = 0;
  double pull_wait_seconds = 0;  // blocked on its next minibatch's rows
  double held_seconds = 0;       // its pulls held at the staleness gate
  uint64_t pulls = 0, held_pulls = 0;
  // Pulls per observed staleness bucket ("0", "1", "2", "<=4", ...), in order.
  std::vector<std::pair<std::string, uint64_t>> staleness;
};

struct WorkerTimeline {
  std::vector<WorkerSample> samples;
  std::vector<WorkerEpoch> epochs;
};

// A membership change or a launcher's event, for the time axis: leaves,
// joins that replace a departed node or rejoin a restarted scheduler (not the
// cluster forming), faults, restarts, and exits no fault explains.
struct JobEvent {
  double time = 0;
  std::string event;   // "join", "leave", "kill", "stop", "restart", "exit", ...
  std::string who;     // "worker 1", "server 0", ...
  std::string detail;  // the reason, the fault's spec, an exit status
};

struct CheckpointRecord {
  std::string id;
  double started = 0;  // Unix seconds, when the servers began copying
  double seconds = 0;  // until it was committed (or abandoned)
  uint64_t bytes = 0;
  int files = 0;
  std::string error;  // "" when committed
};

struct JobRecord {
  std::string model_dir;
  // model.json's job description and hyperparameters, as text, in order.
  std::vector<std::pair<std::string, std::string>> job, hyperparameters;
  std::map<std::string, double> final_metrics;  // metrics.json
  std::vector<HistoryEpoch> history;
  std::map<int, WorkerTimeline> workers;  // by rank
  std::vector<JobEvent> events;           // in time order
  std::vector<CheckpointRecord> checkpoints;
  // Transport faults configured for the job ("drop worker 0: share 0.01").
  std::vector<std::string> transport_faults;
  // The first "start" lines of scheduler.jsonl and launch.jsonl (0: none).
  double scheduler_start = 0, launch_start = 0;
  // When the job started, Unix seconds (0 without a timeline): the earlier
  // of the scheduler's and the launcher's start (the launcher's only if it
  // is within a minute before the scheduler's: else it is an earlier
  // launch's file), else the earliest timeline line.
  double start_time = 0;
};

// Reads everything in `model_dir` (a path or a storage URI). Throws Error if
// the folder has none of the files above, or naming the file and line of a
// malformed one.
JobRecord ReadJobRecord(const std::string& model_dir);

// The parsers, for one file's text; `source` names it in errors.
std::vector<HistoryEpoch> ParseHistory(const std::string& text, const std::string& source);
// Adds the lines of timeline file `name` ("worker-1.jsonl", "scheduler.jsonl",
// "launch.jsonl"; other names are refused) to `record`.
void ParseTimeline(const std::string& name, const std::string& text, const std::string& source,
                   JobRecord* record);

}  // namespace keel

#endif  // KEEL_REPORT_JOB_RECORD_H_
