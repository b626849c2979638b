#include "server/push_staleness.h"

#include <algorithm>

namespace keel {

void PushStaleness::RecordPull(int worker, uint32_t table, int64_t clock, uint64_t version) {
  Reader& reader = readers_[{worker, table}];
  for (const Read& read : reader.reads) {
    if (read.clock == clock) return;
  }
  reader.reads.push_back({clock, version, reader.own_pushes});
  if (reader.reads.size() > kRemembered) reader.reads.pop_front();
}

void PushStaleness::RecordPush(int worker, uint32_t table) {
  // Only a worker that pulls has a staleness to measure.
  auto found = readers_.find({worker, table});
  if (found != readers_.end()) ++found->second.own_pushes;
}

int64_t PushStaleness::Of(int worker, uint32_t table, int64_t read_clock, uint64_t version) const {
  auto found = readers_.find({worker, table});
  if (found == readers_.end()) return 0;
  for (const Read& read : found->second.reads) {
    if (read.clock != read_clock) continue;
    if (read.version >= version) return 0;
    const uint64_t applied = version - read.version;
    const uint64_t own = std::min(found->second.own_pushes - read.own_pushes, applied);
    const uint64_t staleness = applied - own + std::min<uint64_t>(own, 1);
    return Clamp(static_cast<int64_t>(std::min<uint64_t>(staleness, kMaxStaleness)));
  }
  return 0;
}

int64_t PushStaleness::Clamp(int64_t staleness) {
  return std::clamp<int64_t>(staleness, 0, kMaxStaleness);
}

}  // namespace keel
