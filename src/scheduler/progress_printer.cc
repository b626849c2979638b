#include "scheduler/progress_printer.h"

#include "base/time.h"
#include "scheduler/progress_record.h"

namespace keel {

ProgressPrinter::ProgressPrinter(const JobProgress* progress, std::ostream* out, double interval_s)
    : progress_(progress), out_(out), interval_s_(interval_s) {
  thread_ = std::thread([this] { Loop(); });
}

ProgressPrinter::~ProgressPrinter() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void ProgressPrinter::Finish(int failed_workers, const std::string& checkpoint_uri,
                             const std::vector<size_t>& lost_ranges) {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (finished_) return;
  finished_ = true;
  PrintNew();
  PrintLine(FormatProgressRecord(
      EndRecordOf(progress_->Snapshot(MonotonicSeconds()), failed_workers, checkpoint_uri,
                  lost_ranges)));
}

void ProgressPrinter::Loop() {
  // Short waits: Finish joins this loop, and the job's end waits for that.
  constexpr double kWaitS = 0.02;
  uint64_t seen = 0;
  while (!stopping_) {
    seen = progress_->WaitForChange(seen, kWaitS);
    PrintNew();
  }
}

void ProgressPrinter::PrintNew() {
  const double now = MonotonicSeconds();
  const ProgressSnapshot snapshot = progress_->Snapshot(now);
  for (; epochs_printed_ < snapshot.decided.size(); ++epochs_printed_) {
    PrintLine(
        FormatProgressRecord(EpochRecordOf(snapshot.decided[epochs_printed_], snapshot.epochs)));
  }
  const bool changed = snapshot.version != version_printed_;
  if (snapshot.epoch > 0 && changed && now - last_progress_ >= interval_s_) {
    PrintLine(FormatProgressRecord(ProgressRecordOf(snapshot)));
    version_printed_ = snapshot.version;
    last_progress_ = now;
  }
}

void ProgressPrinter::PrintLine(const std::string& line) {
  std::lock_guard<std::mutex> lock(print_mutex_);
  *out_ << line << std::endl;
}

}  // namespace keel
