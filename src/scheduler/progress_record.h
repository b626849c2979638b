// Progress records: the job's progress as lines of text, which
// `keel scheduler --progress_records` prints on its standard output and
// `keel launch` recognises among its roles' output and renders (whichever way
// the scheduler was started: locally, over ssh). A record is one line:
// kProgressRecordPrefix, then one JSON object.
//
//   keel-progress {"type":"progress","epoch":3,"epochs":15,"examples":40000,
//     "expected":85000,"rate":812000,"fraction":0.47,"eta":21.5,"loss":0.52,"seconds":9.1}
//   keel-progress {"type":"epoch","epoch":3,"epochs":15,"examples":85000,"seconds":11.2,
//     "stop":false,"metrics":{"validation:roc_auc_score":0.7712,...}}
//   keel-progress {"type":"end","epochs":15,"epochs_run":15,"stopped_early":false,
//     "reported":true,"examples":1275000,"seconds":31.4,"failed_workers":0,
//     "metrics":{...},"model_dir":"...","checkpoint_uri":"...","lost_ranges":[]}
//
// Unknown numbers are -1 (fraction, eta); non-finite metrics are null.
#ifndef KEEL_SCHEDULER_PROGRESS_RECORD_H_
#define KEEL_SCHEDULER_PROGRESS_RECORD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "models/metrics.h"
#include "scheduler/job_progress.h"

namespace keel {

constexpr char kProgressRecordPrefix[] = "keel-progress ";

struct ProgressRecord {
  enum class Type { kProgress, kEpoch, kEnd };
  Type type = Type::kProgress;
  int epoch = 0;   // progress: the current epoch; epoch: the decided one
  int epochs = 0;  // the job's
  // progress: examples of the epoch read so far; epoch: the epoch's; end:
  // every decided epoch's.
  uint64_t examples = 0;
  uint64_t expected = 0;  // progress: examples in an epoch (0: not known)
  double rate = 0;        // progress: examples per second, smoothed
  double fraction = -1;   // progress: of the epoch
  double eta = -1;        // progress: seconds left
  double loss = 0;        // progress: mean training loss of the epoch so far
  // progress: since the first report; epoch: into the job at its decision;
  // end: into the job at the last decision (else since the first report).
  double seconds = 0;
  bool stop = false;  // epoch: early stopping ends the job here; end: it did
  // end: the epochs run, whether the leading worker reported the end, and
  // how many workers failed.
  int epochs_run = 0;
  bool reported = false;
  int failed_workers = 0;
  MetricSet metrics;           // epoch: its figures; end: the final metrics
  std::string model_dir;       // end
  std::string checkpoint_uri;  // end: "" without checkpoints
  // end: key ranges that lost every replica during the job (LostRanges).
  std::vector<size_t> lost_ranges;
};

// The record as one line (without the newline), kProgressRecordPrefix first.
std::string FormatProgressRecord(const ProgressRecord& record);

// False if `line` is not a record (it does not start with
// kProgressRecordPrefix). Throws Error naming what is wrong if it starts so
// but is not a well-formed record.
bool ParseProgressRecord(const std::string& line, ProgressRecord* record);

// A snapshot's progress record, a decided epoch's record, and the end's.
ProgressRecord ProgressRecordOf(const ProgressSnapshot& snapshot);
ProgressRecord EpochRecordOf(const DecidedEpoch& epoch, int epochs);
ProgressRecord EndRecordOf(const ProgressSnapshot& snapshot, int failed_workers,
                           const std::string& checkpoint_uri,
                           const std::vector<size_t>& lost_ranges = {});

}  // namespace keel

#endif  // KEEL_SCHEDULER_PROGRESS_RECORD_H_
