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
  if (changed_only) {
    table.rows->ForEachChangedSince(table.copied_stamp, append);
    copy->deleted.insert(copy->deleted.end(), table.removed.begin(), table.removed.end());
    return;
  }
  copy->keys.reserve(copy->keys.size() + table.rows->size());
  copy->rows.reserve(copy->rows.size() + table.rows->size() * copy->row_width);
  table.rows->ForEach(append);
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

SnapshotTable SortedCopy(uint32_t id, const ServerTable& table) {
  std::vector<std::pair<Key, const float*>> sorted;
  table.rows->ForEach([&](Key key, const float* row) { sorted.emplace_back(key, row); });
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
    ++copied;
  }
  return copied;
}

}  // namespace keel
