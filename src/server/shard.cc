#include "server/shard.h"

#include <algorithm>
#include <cstring>

namespace keel {

void AppendRows(const ServerTable& table, SnapshotTable* copy, bool changed_only, Key first,
                Key last) {
  copy->weight_width = static_cast<uint32_t>(table.rows->weight_width());
  copy->row_width = static_cast<uint32_t>(table.rows->row_width());
  auto append = [&](Key key, const float* row) {
    copy->keys.push_back(key);
    copy->rows.insert(copy->rows.end(), row, row + copy->row_width);
  };
  if (table.admission) {
    RangeSketch sketch;
    sketch.first = first;
    sketch.last = last;
    sketch.depth = table.admission->depth();
    sketch.width = table.admission->width();
    sketch.counters = table.admission->counters();
    copy->sketches.push_back(std::move(sketch));
  }
  const uint32_t since = changed_only ? table.copied_stamp : 0;
  if (changed_only) {
    copy->deleted.insert(copy->deleted.end(), table.removed.begin(), table.removed.end());
  } else {
    copy->keys.reserve(copy->keys.size() + table.rows->size());
    copy->rows.reserve(copy->rows.size() + table.rows->size() * copy->row_width);
  }
  if (table.evict_after == 0) {
    if (changed_only) {
      table.rows->ForEachChangedSince(since, append);
    } else {
      table.rows->ForEach(append);
    }
    return;
  }
  // Eviction: each row's clock of its last push, from its stamp (the last
  // clock whose stamp is not above it; before the clocks kept, the one
  // before them), and the range's clock.
  copy->clocks.push_back(RangeClock{first, last, table.clock});
  std::vector<std::pair<uint32_t, uint64_t>> stamp_clocks;  // ascending in both
  for (const auto& [clock, stamp] : table.clock_stamps) stamp_clocks.emplace_back(stamp, clock);
  const uint64_t before = stamp_clocks.empty() ? table.clock : stamp_clocks.front().second - 1;
  copy->pushed_at.resize(copy->keys.size(), 0);
  table.rows->ForEachStamped(since, [&](Key key, const float* row, uint32_t stamp) {
    append(key, row);
    auto after = std::upper_bound(stamp_clocks.begin(), stamp_clocks.end(),
                                  std::make_pair(stamp, ~uint64_t{0}));
    copy->pushed_at.push_back(after == stamp_clocks.begin() ? before : std::prev(after)->second);
  });
}

uint64_t AdmitKeys(const Key* keys, size_t count, const ServerTable& table,
                   std::vector<size_t>* kept) {
  kept->clear();
  kept->reserve(count);
  uint64_t admitted = 0;
  for (size_t i = 0; i < count; ++i) {
    if (table.rows->Find(keys[i])) {
      kept->push_back(i);
    } else if (table.admission->Add(keys[i]) >= table.admit_after) {
      kept->push_back(i);
      ++admitted;
    }
  }
  return admitted;
}

SnapshotTable SortedCopy(uint32_t id, const ServerTable& table, uint32_t since, size_t slot_begin,
                         size_t slot_end) {
  std::vector<std::pair<Key, const float*>> sorted;
  auto take = [&](Key key, const float* row) { sorted.emplace_back(key, row); };
  if (since > 0) {
    table.rows->ForEachChangedSince(since, take);
  } else {
    table.rows->ForEachInSlots(slot_begin, slot_end, take);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  SnapshotTable copy;
  copy.table = id;
  copy.weight_width = static_cast<uint32_t>(table.rows->weight_width());
  copy.row_width = static_cast<uint32_t>(table.rows->row_width());
  copy.keys.reserve(sorted.size());
  copy.rows.reserve(sorted.size() * copy.row_width);
  for (const auto& [key, row] : sorted) {
    copy.keys.push_back(key);
    copy.rows.insert(copy.rows.end(), row, row + copy.row_width);
  }
  return copy;
}

uint64_t CopyRowsIn(const SnapshotTable& saved, Key first, Key last, ParameterTable* rows) {
  uint64_t copied = 0;
  auto it = std::lower_bound(saved.keys.begin(), saved.keys.end(), first);
  for (; it != saved.keys.end() && *it <= last; ++it) {
    const size_t index = static_cast<size_t>(it - saved.keys.begin());
    std::memcpy(rows->FindOrInsert(*it), saved.rows.data() + index * saved.row_width,
                sizeof(float) * saved.row_width);
    // Eviction: until the restore ends, a row's stamp holds its last push's
    // clock (RestoreClocks).
    if (!saved.pushed_at.empty()) {
      rows->SetStamp(
          *it, static_cast<uint32_t>(std::min<uint64_t>(saved.pushed_at[index], UINT32_MAX - 1)));
    }
    ++copied;
  }
  return copied;
}

bool KeepsDepartedRecords(const proto::ClusterView& view, size_t range, const Shard& shard) {
  if (!shard.ready || !shard.held.empty()) return true;
  if (range >= static_cast<size_t>(view.ranges_size())) return false;
  const proto::KeyRange& key_range = view.ranges(static_cast<int>(range));
  return key_range.copying_size() > 0 || key_range.precopy_size() > 0;
}

}  // namespace keel
