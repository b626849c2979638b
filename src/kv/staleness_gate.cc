#include "kv/staleness_gate.h"

#include <algorithm>
#include <iterator>

namespace keel {

int64_t StalenessGate::MinClock() const {
  int64_t minimum = std::numeric_limits<int64_t>::max();
  for (const auto& [worker, clock] : clocks_) minimum = std::min(minimum, clock);
  return minimum;
}

void StalenessGate::Advance(int worker, int64_t clock) {
  auto it = clocks_.find(worker);
  if (it == clocks_.end()) {
    const int64_t minimum = clocks_.empty() ? clock : MinClock();
    clocks_[worker] = std::max(clock, minimum);
    return;
  }
  it->second = std::max(it->second, clock);
}

void StalenessGate::Remove(int worker) { clocks_.erase(worker); }

void StalenessGate::RemoveMissing(const std::set<int>& workers) {
  for (auto it = clocks_.begin(); it != clocks_.end();) {
    it = workers.count(it->first) ? std::next(it) : clocks_.erase(it);
  }
}

}  // namespace keel
