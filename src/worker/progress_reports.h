// The reports a worker sends for the job's progress display (see
// proto::ProgressReport and scheduler/job_progress.h): what every worker's
// heartbeats carry, and the leading worker's figures of each epoch and of the
// job's end.
#ifndef KEEL_WORKER_PROGRESS_REPORTS_H_
#define KEEL_WORKER_PROGRESS_REPORTS_H_

#include <cstdint>
#include <string>

#include "keel.pb.h"
#include "models/metrics.h"

namespace keel {

// Every worker, with its heartbeats: the job's `epochs` and the examples of
// its share of an epoch (0: not known, as for a pipe).
proto::ProgressReport ShareReport(int epochs, uint64_t share_examples);

// The leading worker, once `epoch` is decided, `seconds` into the job:
// `examples` read by every worker (`total_examples` in every epoch so far,
// this one included), the epoch's `figures` (the selected model's; each
// model's own, model_<k>:*, stay in history.jsonl), and whether early
// stopping ends the job here.
proto::ProgressReport EpochReport(int epochs, int epoch, uint64_t examples,
                                  uint64_t total_examples, double seconds,
                                  const MetricSet& figures, bool stop);

// The leading worker, at the end: the epochs run, whether early stopping
// ended the job, its final `metrics` (the selected model's) and the folder
// the model and metrics.json went to ("" for none).
proto::ProgressReport OutcomeReport(int epochs, int epochs_run, bool stopped_early,
                                    const MetricSet& metrics, const std::string& model_dir);

}  // namespace keel

#endif  // KEEL_WORKER_PROGRESS_REPORTS_H_
