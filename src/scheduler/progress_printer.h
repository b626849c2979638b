// ProgressPrinter: `keel scheduler --progress_records` prints its JobProgress
// as progress records (scheduler/progress_record.h) on standard output, for
// `keel launch` to render.
#ifndef KEEL_SCHEDULER_PROGRESS_PRINTER_H_
#define KEEL_SCHEDULER_PROGRESS_PRINTER_H_

#include <atomic>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/job_progress.h"

namespace keel {

class ProgressPrinter {
 public:
  // Prints to `out` on a thread of its own: each decided epoch once, as soon
  // as it is known, and a progress record at most every `interval_s` while
  // reports change. `progress` and `out` must outlive the printer.
  ProgressPrinter(const JobProgress* progress, std::ostream* out, double interval_s = 0.5);
  ~ProgressPrinter();
  ProgressPrinter(const ProgressPrinter&) = delete;
  ProgressPrinter& operator=(const ProgressPrinter&) = delete;

  // Stops the thread, prints what is not printed yet and then the end record
  // (`failed_workers`, where checkpoints went). Once; later calls do nothing.
  void Finish(int failed_workers, const std::string& checkpoint_uri,
              const std::vector<size_t>& lost_ranges = {});

 private:
  void Loop();
  // Prints the decided epochs not printed yet and, when due, a progress record.
  void PrintNew();
  void PrintLine(const std::string& line);

  const JobProgress* progress_;
  std::ostream* out_;
  const double interval_s_;
  std::atomic<bool> stopping_{false};
  bool finished_ = false;
  size_t epochs_printed_ = 0;
  uint64_t version_printed_ = 0;
  double last_progress_ = -1e9;
  std::mutex print_mutex_;
  std::thread thread_;
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_PROGRESS_PRINTER_H_
