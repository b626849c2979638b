// StalenessGate: a server's view of every live worker's clock, and the rule
// that holds back a pull until the slowest worker has caught up.
//
// A worker's clock counts the minibatches it has pushed. A pull stamped with
// clock c is admitted once every live worker's clock is at least
// c - staleness: staleness 0 is bulk-synchronous, k bounded staleness,
// kAsynchronous never holds a pull. A worker that leaves stops counting at
// once; one that (re)joins starts at the current minimum, so it never holds
// the others back for batches it did not take part in.
//
// Clocks are kept per slot, a (key range, table): a worker has reached clock
// c in a slot once its pushes stamped c there are applied, or, for a slot its
// minibatch did not push to, once it announced c (CLOCK). An announcement
// names the slots it does not speak for (those with a push stamped c still
// unanswered): there only the push counts, wherever it is applied. So a pull
// never reads a slot before the pushes of the clocks it waits for, however
// many slots one server holds and in whatever order a resent push comes.
// Not synchronized: a server uses it from its receive thread.
#ifndef KEEL_KV_STALENESS_GATE_H_
#define KEEL_KV_STALENESS_GATE_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace keel {

// The clock a worker reports when it stops counting (end of its epoch, or of
// the job); its next clock makes it count again.
constexpr int64_t kLeaveClock = -1;

// (key range, table): what the gate counts clocks in.
using GateSlot = std::pair<uint32_t, uint32_t>;

class StalenessGate {
 public:
  static constexpr int64_t kAsynchronous = -1;

  explicit StalenessGate(int64_t staleness) : staleness_(staleness) {}

  int64_t staleness() const { return staleness_; }
  bool asynchronous() const { return staleness_ < 0; }

  // An announcement: `worker` reached `clock` in every slot but `pushed`
  // (clocks never go back). A worker not yet counted joins at max(clock, the
  // current minimum), and in `pushed` just below that.
  void Advance(int worker, int64_t clock, const std::vector<GateSlot>& pushed = {});
  // A push of `worker` stamped `clock` was applied in `slot`. A worker not
  // yet counted joins there (and just below `clock` elsewhere) if `join`,
  // else the push is not counted.
  void AdvanceSlot(int worker, const GateSlot& slot, int64_t clock, bool join);
  // `worker` stops counting.
  void Remove(int worker);
  // Workers not in `workers` (a new view's) stop counting. Workers in it
  // join when they first report a clock.
  void RemoveMissing(const std::set<int>& workers);

  // The slowest counted worker's clock in `slot` (max int64 when none is
  // counted).
  int64_t MinClock(const GateSlot& slot) const;
  // Whether a pull of `slot` stamped with `clock` may be answered now.
  bool Admits(const GateSlot& slot, int64_t clock) const {
    return asynchronous() || clock - staleness_ <= MinClock(slot);
  }
  size_t workers() const { return clocks_.size(); }

 private:
  // A worker's clock: `clock` in every slot but those in `slots`, which are
  // behind it (announced without them) or ahead of it (pushed, not yet
  // announced).
  struct WorkerClock {
    int64_t clock = 0;
    std::map<GateSlot, int64_t> slots;
  };

  static int64_t ClockIn(const WorkerClock& worker, const GateSlot& slot);
  // The lowest clock any counted worker has anywhere it was announced.
  int64_t LowestAnnounced() const;
  WorkerClock& Join(int worker, int64_t clock);

  int64_t staleness_;
  std::map<int, WorkerClock> clocks_;  // counted workers
};

}  // namespace keel

#endif  // KEEL_KV_STALENESS_GATE_H_
