// The closing summary `keel launch` prints when a job ends: how it ended and
// in how long, its throughput, the selected model's validation and test
// metrics, and where the model, its metrics, the checkpoints and the logs went.
#ifndef KEEL_LAUNCH_JOB_SUMMARY_H_
#define KEEL_LAUNCH_JOB_SUMMARY_H_

#include <optional>
#include <string>

#include "scheduler/progress_record.h"

namespace keel {

struct JobSummaryInput {
  // The launch's exit code: 0, 1 (a role failed), kDataLostExitStatus,
  // kPreemptedExitStatus, 124 (--timeout), 130 (interrupted); see
  // ProcessGroup::Wait.
  int exit_code = 0;
  double wall_seconds = 0;            // the launch's whole run
  std::optional<ProgressRecord> end;  // the scheduler's end record, if it came
  std::string log_dir;                // where each role's output went ("" nowhere)
  std::string working_folder;         // a relative model folder is taken from here
};

// The summary's lines, each ending in a newline.
std::string FormatJobSummary(const JobSummaryInput& input);

}  // namespace keel

#endif  // KEEL_LAUNCH_JOB_SUMMARY_H_
