#include "server/push_staleness.h"

#include <algorithm>

namespace keel {

void PushStaleness::RecordPull(int worker, uint32_t table, int64_t clock, uint64_t version) {
  auto& reads = reads_[{worker, table}];
  for (const auto& read : reads) {
    if (read.first == clock) return;
  }
  reads.emplace_back(clock, version);
  if (reads.size() > kRemembered) reads.pop_front();
}

int64_t PushStaleness::Of(int worker, uint32_t table, int64_t read_clock, uint64_t version) const {
  auto found = reads_.find({worker, table});
  if (found == reads_.end()) return 0;
  for (const auto& [clock, read_version] : found->second) {
    if (clock != read_clock) continue;
    if (read_version >= version) return 0;
    return Clamp(static_cast<int64_t>(std::min<uint64_t>(version - read_version, kMaxStaleness)));
  }
  return 0;
}

int64_t PushStaleness::Clamp(int64_t staleness) {
  return std::clamp<int64_t>(staleness, 0, kMaxStaleness);
}

}  // namespace keel
