// The arithmetic of a job's progress display: a smoothed rate of examples and
// where the job stands (share of the epoch done, time left).
#ifndef KEEL_SCHEDULER_PROGRESS_ESTIMATE_H_
#define KEEL_SCHEDULER_PROGRESS_ESTIMATE_H_

#include <cstdint>

namespace keel {

// Examples per second, smoothed: counts are gathered over windows of at least
// `window_s`, and each window's rate moves the estimate by 1 - exp(-length /
// `time_constant_s`) of the way (the first window sets it). Not synchronized.
class RateMeter {
 public:
  explicit RateMeter(double window_s = 1.0, double time_constant_s = 5.0);

  // `examples` more were read from `since` to `now` (seconds on any monotonic
  // clock). A window opens at the `since` of the first call (and of the first
  // after Pause) and closes at the first `now` at least window_s later.
  void Add(uint64_t examples, double since, double now);
  // Drops the window being gathered (the time until the next Add is not
  // counted); the rate stays as it was.
  void Pause();
  // The smoothed rate; 0 until the first window closed.
  double rate() const { return rate_; }

 private:
  double window_s_, time_constant_s_;
  double window_begin_ = -1;  // -1: no window open yet
  uint64_t window_examples_ = 0;
  double rate_ = 0;
  bool measured_ = false;
};

// What a progress display shows beside the counts.
struct ProgressFigures {
  double epoch_fraction = -1;  // of the current epoch, in [0, 1]; -1: not known
  double eta_seconds = -1;     // until the last epoch ends; -1: not known
};

// What the figures are worked out from.
struct ProgressCounts {
  int epoch = 0;                   // the current epoch, 1-based
  int epochs = 0;                  // the job's epochs
  uint64_t epoch_done = 0;         // examples of the current epoch read so far
  uint64_t epoch_expected = 0;     // examples in an epoch; 0: not known
  double rate = 0;                 // examples per second now (RateMeter)
  double seconds_per_example = 0;  // wall time of the decided epochs (validation included)
                                   // over their examples; 0: none decided yet
  bool stopping = false;           // early stopping decided: no epoch follows
};

// The epoch's share done, and the time left: the examples still to read (the
// rest of this epoch, then every epoch after it; none after an early stop)
// at the decided epochs' wall time per example when there is one (it counts
// validation and barriers), else at `rate`. Unknown (-1) without an epoch
// size or without a rate.
ProgressFigures EstimateProgress(const ProgressCounts& counts);

}  // namespace keel

#endif  // KEEL_SCHEDULER_PROGRESS_ESTIMATE_H_
