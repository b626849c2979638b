// ProgressDisplay: how `keel launch` shows the job's progress records
// (scheduler/progress_record.h) on its terminal.
//
// As a bar, on a terminal: one line per epoch, rewritten in place
//   epoch 3/15  47%  812k ex/s  ETA 0:21  validation roc_auc_score 0.7712
// and finished with a newline when the epoch is decided. As plain lines (a
// pipe, a CI log): a line every `line_interval_s` and one at each epoch's end.
// Other lines (warnings, errors) are printed above the bar, which is drawn
// again after them.
//
// Not synchronized: the launcher calls it from the thread that forwards output.
#ifndef KEEL_LAUNCH_PROGRESS_DISPLAY_H_
#define KEEL_LAUNCH_PROGRESS_DISPLAY_H_

#include <functional>
#include <optional>
#include <string>

#include "models/metrics.h"
#include "scheduler/progress_record.h"

namespace keel {

enum class ProgressMode { kBar, kLines, kNone };

// --progress's value: bar, lines, none, or auto (bar when standard output is
// a `terminal`, else lines). Throws Error naming the flag for anything else.
ProgressMode ProgressModeFromFlag(const std::string& value, bool terminal);

// Writes `text` as is (its own newlines and control characters) to standard
// output, or to standard error.
using ConsoleWrite = std::function<void(const std::string& text, bool to_stderr)>;

class ProgressDisplay {
 public:
  // `width`: the terminal's columns (a bar longer than that is cut, since a
  // wrapped line cannot be rewritten in place); 0: no limit.
  ProgressDisplay(ProgressMode mode, ConsoleWrite write, int width = 0, double line_interval_s = 5);

  // A record from the scheduler, arrived at `now` (seconds, monotonic).
  void OnRecord(const ProgressRecord& record, double now);
  // A line that is not progress, `line` without its newline.
  void PrintLine(const std::string& line, bool to_stderr);
  // Ends a bar being drawn (the summary follows on lines of its own).
  void EndBar();

  // The latest decided epoch and the end record, if they came.
  const std::optional<ProgressRecord>& last_epoch() const { return last_epoch_; }
  const std::optional<ProgressRecord>& end() const { return end_; }

 private:
  void OnProgress(const ProgressRecord& record, double now);
  void OnEpoch(const ProgressRecord& record);
  void DrawBar();

  const ProgressMode mode_;
  ConsoleWrite write_;
  const int width_;
  const double line_interval_s_;
  std::string bar_;  // the bar as drawn now; "" when none is
  double last_line_ = -1e9;
  double previous_epoch_seconds_ = 0;
  std::optional<ProgressRecord> last_epoch_, end_;
};

// 0:21, 12:05, 1:02:03; "?" for a negative (unknown) time or one beyond 10^9 s.
std::string FormatDuration(double seconds);
// 950, 81.2k, 812k, 1.2M: a rate or a count, three digits at most.
std::string FormatCompact(double value);
// The text of a bar for `progress`, showing `last_epoch`'s headline metric.
std::string BarText(const ProgressRecord& progress,
                    const std::optional<ProgressRecord>& last_epoch);
// The line of a decided epoch that took `seconds`.
std::string EpochText(const ProgressRecord& epoch, double seconds);
// The plain line of `progress`.
std::string ProgressLineText(const ProgressRecord& progress);

}  // namespace keel

#endif  // KEEL_LAUNCH_PROGRESS_DISPLAY_H_
