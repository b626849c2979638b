#include "kv/staleness_gate.h"

#include <algorithm>
#include <iterator>

namespace keel {

int64_t StalenessGate::ClockIn(const WorkerClock& worker, const GateSlot& slot) {
  const auto found = worker.slots.find(slot);
  return found == worker.slots.end() ? worker.clock : found->second;
}

int64_t StalenessGate::MinClock(const GateSlot& slot) const {
  int64_t minimum = std::numeric_limits<int64_t>::max();
  for (const auto& [worker, clock] : clocks_) minimum = std::min(minimum, ClockIn(clock, slot));
  return minimum;
}

int64_t StalenessGate::LowestAnnounced() const {
  int64_t minimum = std::numeric_limits<int64_t>::max();
  for (const auto& [worker, clock] : clocks_) minimum = std::min(minimum, clock.clock);
  return minimum;
}

StalenessGate::WorkerClock& StalenessGate::Join(int worker, int64_t clock) {
  const int64_t minimum = clocks_.empty() ? clock : LowestAnnounced();
  WorkerClock& joined = clocks_[worker];
  joined.clock = std::max(clock, minimum);
  return joined;
}

void StalenessGate::Advance(int worker, int64_t clock, const std::vector<GateSlot>& pushed) {
  const std::set<GateSlot> not_spoken_for(pushed.begin(), pushed.end());
  auto it = clocks_.find(worker);
  if (it == clocks_.end()) {
    WorkerClock& joined = Join(worker, clock);
    // Behind the others' minimum already: counted there, pushes or not.
    if (joined.clock > clock) return;
    for (const GateSlot& slot : not_spoken_for) joined.slots[slot] = clock - 1;
    return;
  }
  WorkerClock& known = it->second;
  for (auto& [slot, at] : known.slots) {
    if (!not_spoken_for.count(slot)) at = std::max(at, clock);
  }
  if (clock > known.clock) {
    // Where this announcement does not speak the old clock holds, until the
    // push stamped `clock` is applied.
    for (const GateSlot& slot : not_spoken_for) known.slots.emplace(slot, known.clock);
    known.clock = clock;
  }
  for (auto slot = known.slots.begin(); slot != known.slots.end();) {
    slot = slot->second == known.clock ? known.slots.erase(slot) : std::next(slot);
  }
}

void StalenessGate::AdvanceSlot(int worker, const GateSlot& slot, int64_t clock, bool join) {
  auto it = clocks_.find(worker);
  if (it == clocks_.end()) {
    if (!join) return;
    // Counted at `clock` where it pushed; elsewhere only once it gets there.
    Join(worker, clock - 1);
    it = clocks_.find(worker);
  }
  WorkerClock& known = it->second;
  const int64_t reached = std::max(ClockIn(known, slot), clock);
  if (reached == known.clock) {
    known.slots.erase(slot);
  } else {
    known.slots[slot] = reached;
  }
}

void StalenessGate::Remove(int worker) { clocks_.erase(worker); }

void StalenessGate::RemoveMissing(const std::set<int>& workers) {
  for (auto it = clocks_.begin(); it != clocks_.end();) {
    it = workers.count(it->first) ? std::next(it) : clocks_.erase(it);
  }
}

}  // namespace keel
