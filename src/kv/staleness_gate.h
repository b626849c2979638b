// StalenessGate: a server's view of every live worker's clock, and the rule
// that holds back a pull until the slowest worker has caught up.
//
// A worker's clock counts the minibatches it has pushed. A pull stamped with
// clock c is admitted once every live worker's clock is at least
// c - staleness: staleness 0 is bulk-synchronous, k bounded staleness,
// kAsynchronous never holds a pull. A worker that leaves stops counting at
// once; one that (re)joins starts at the current minimum, so it never holds
// the others back for batches it did not take part in.
// Not synchronized: a server uses it from its receive thread.
#ifndef KEEL_KV_STALENESS_GATE_H_
#define KEEL_KV_STALENESS_GATE_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <set>

namespace keel {

// The clock a worker reports when it stops counting (end of its epoch, or of
// the job); its next clock makes it count again.
constexpr int64_t kLeaveClock = -1;

class StalenessGate {
 public:
  static constexpr int64_t kAsynchronous = -1;

  explicit StalenessGate(int64_t staleness) : staleness_(staleness) {}

  int64_t staleness() const { return staleness_; }
  bool asynchronous() const { return staleness_ < 0; }

  // Records that `worker` reached `clock` (clocks never go back). A worker not
  // yet counted joins at max(clock, the current minimum).
  void Advance(int worker, int64_t clock);
  // `worker` stops counting.
  void Remove(int worker);
  // Workers not in `workers` (a new view's) stop counting. Workers in it
  // join when they first report a clock.
  void RemoveMissing(const std::set<int>& workers);

  // The slowest counted worker's clock (max int64 when none is counted).
  int64_t MinClock() const;
  // Whether a pull stamped with `clock` may be answered now.
  bool Admits(int64_t clock) const { return asynchronous() || clock - staleness_ <= MinClock(); }
  size_t workers() const { return clocks_.size(); }

 private:
  int64_t staleness_;
  std::map<int, int64_t> clocks_;  // counted workers
};

}  // namespace keel

#endif  // KEEL_KV_STALENESS_GATE_H_
