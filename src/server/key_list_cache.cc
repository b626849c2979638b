#include "server/key_list_cache.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "base/error.h"

namespace keel {

void KeyCacheBounds::Check() const {
  if (lists == 0) throw MakeError("key cache: the lists kept per worker must be at least 1");
  if (bytes == 0) throw MakeError("key cache: the bytes kept per worker must be at least 1");
  if (total_bytes == 0) throw MakeError("key cache: the bytes kept in all must be at least 1");
}

bool KeyListCache::Keep(int sender, uint64_t id, const SharedArray<const Key>& keys) {
  auto found = entries_.find({sender, id});
  if (found != entries_.end()) {
    // Ids are never reused: the same list sent again (a resend, or requests in
    // flight together) is kept already; a different one is not taken.
    const SharedArray<const Key>& kept = found->second.keys();
    return kept.size() == keys.size() &&
           std::memcmp(kept.data(), keys.data(), keys.size() * sizeof(Key)) == 0;
  }
  const size_t bytes = keys.size() * kBytesPerKey;
  SenderTotals& totals = senders_[sender];
  if (id == 0 || keys.size() == 0 || totals.lists + 1 > bounds_.lists ||
      totals.bytes + bytes > bounds_.bytes || bytes_ + bytes > bounds_.total_bytes) {
    if (totals.lists == 0) senders_.erase(sender);
    return false;
  }
  entries_.emplace(std::make_pair(sender, id), List(keys));
  ++totals.lists;
  totals.bytes += bytes;
  bytes_ += bytes;
  return true;
}

KeyListCache::List* KeyListCache::Find(int sender, uint64_t id) {
  auto found = entries_.find({sender, id});
  return found == entries_.end() ? nullptr : &found->second;
}

const std::vector<uint32_t>* KeyListCache::List::SlotsIn(uint32_t table,
                                                         const ParameterTable& rows) const {
  for (const TableSlots& slots : tables_) {
    if (slots.table == table && slots.found && slots.layout == rows.layout()) return &slots.slots;
  }
  return nullptr;
}

void KeyListCache::List::KeepSlotsIn(uint32_t table, const ParameterTable& rows, bool found,
                                     std::vector<uint32_t> slots) noexcept {
  auto kept = std::find_if(tables_.begin(), tables_.end(),
                           [&](const TableSlots& entry) { return entry.table == table; });
  if (kept != tables_.end()) {
    tables_.erase(kept);
  } else if (tables_.size() == kSlotTables) {
    tables_.erase(tables_.begin());
  }
  TableSlots entry;
  entry.table = table;
  entry.layout = rows.layout();
  entry.rows = rows.size();
  entry.found = found;
  if (found) entry.slots = std::move(slots);
  try {
    tables_.push_back(std::move(entry));
  } catch (const std::bad_alloc&) {
    // Left without this table's slots: its keys are probed next time.
  }
}

bool KeyListCache::List::FoundInVain(uint32_t table, const ParameterTable& rows) const {
  for (const TableSlots& entry : tables_) {
    if (entry.table == table) {
      return !entry.found && entry.layout == rows.layout() && entry.rows == rows.size();
    }
  }
  return false;
}

void KeyListCache::Clear() {
  entries_.clear();
  senders_.clear();
  bytes_ = 0;
}

void KeyListCache::ForgetSendersUnless(const std::function<bool(int sender)>& keep) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (keep(it->first.first)) {
      ++it;
      continue;
    }
    bytes_ -= it->second.keys().size() * kBytesPerKey;
    senders_.erase(it->first.first);
    it = entries_.erase(it);
  }
}

}  // namespace keel
