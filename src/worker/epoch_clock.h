// EpochClock: this worker's staleness-gate clock (StalenessGate) during one
// epoch, as a function of the minibatches it has pushed.
//
// Clocks restart at a new base every epoch, so a worker whose shard had fewer
// minibatches does not hold the others back in the next one: each worker
// joins the gate at the epoch's base and leaves it at its end. The clock
// advances every `clock_every` minibatches.
#ifndef KEEL_WORKER_EPOCH_CLOCK_H_
#define KEEL_WORKER_EPOCH_CLOCK_H_

#include <algorithm>
#include <cstdint>

namespace keel {

class EpochClock {
 public:
  // `clock_every` below 1 counts as 1.
  EpochClock(int epoch, int clock_every)
      : base_(static_cast<int64_t>(epoch) << 32),
        every_(static_cast<uint64_t>(std::max(1, clock_every))) {}
  // Clock 0 however many minibatches are pushed: the clock of requests
  // outside an epoch's gate (a departed worker's share read after this
  // worker left it), which the gate neither counts nor holds.
  static EpochClock Outside() {
    EpochClock clock(0, 1);
    clock.every_ = UINT64_MAX;
    return clock;
  }

  // The clock once `batches` minibatches of the epoch are pushed.
  int64_t After(uint64_t batches) const { return base_ + static_cast<int64_t>(batches / every_); }
  // True when the clock has just advanced at `batches` minibatches.
  bool AdvancesAt(uint64_t batches) const { return batches % every_ == 0; }

 private:
  int64_t base_;
  uint64_t every_;
};

}  // namespace keel

#endif  // KEEL_WORKER_EPOCH_CLOCK_H_
