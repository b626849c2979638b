#include "kv/parameter_table.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"

namespace keel {
namespace {

constexpr int kInitialLogCapacity = 10;
// Keys and rows are prefetched this many keys ahead of the one being used.
constexpr size_t kPrefetchDistance = 16;

// Calls copy(width) with rows of one float and of 8 (the default's 8 linear
// models) as a std::integral_constant, so that their copies have a size known
// when compiled (a copy of a size known only at run time is a library call
// per row), and with 0 for the others (the width at run time).
template <typename Copy>
void WithRowWidth(size_t width, Copy copy) {
  if (width == 1) return copy(std::integral_constant<size_t, 1>());
  if (width == 8) return copy(std::integral_constant<size_t, 8>());
  copy(std::integral_constant<size_t, 0>());
}
// An insertion or a rebuild probing further than this from a key's home slot
// turns the ordered layout off. Mixed keys at load 3/4 probe a few hundred
// slots at worst in a table of 10^7; clustered ones, thousands.
constexpr size_t kMaxOrderedProbe = 1024;
// So does a layout whose probes since it was made average more than this per
// row placed (beyond a first kMaxOrderedProbe): mixed keys average under 8 at
// load 3/4, while keys that fill only part of the key range pile into runs
// whose probes grow with the run, each probe shorter than kMaxOrderedProbe
// but quadratic in all.
constexpr uint64_t kOrderedProbesPerRow = 32;
// Rows handed to the optimizer at once.
constexpr size_t kUpdateChunk = 256;
// Tables made so far in this process: each table's Layout names it by its
// number, so slots found in a table gone are never taken for another's.
std::atomic<uint64_t> tables_made{0};

// Whether `probes` slots passed over while placing `rows` rows is more than
// the ordered layout may cost.
bool OrderedTooCostly(uint64_t probes, uint64_t rows) {
  return probes > kOrderedProbesPerRow * rows + kMaxOrderedProbe;
}

}  // namespace

ParameterTable::ParameterTable(int weight_width, int state_width, Initializer initializer,
                               Key first_key, Key last_key)
    : weight_width_(weight_width),
      row_width_(weight_width + state_width),
      initializer_(std::move(initializer)),
      shares_rows_(static_cast<size_t>(row_width_) * sizeof(float) >= kSharedRowBytes),
      serial_(tables_made.fetch_add(1) + 1),
      first_key_(first_key),
      last_key_(last_key) {
  if (last_key < first_key) throw MakeError("a table's key range ends before it begins");
  if (weight_width <= 0 || state_width < 0) {
    throw MakeError("a table needs a positive row width, got ", weight_width, " weights + ",
                    state_width, " state");
  }
  const size_t row_bytes = shares_rows_ ? 0 : sizeof(float) * static_cast<size_t>(row_width_);
  slot_bytes_ = sizeof(Key) + row_bytes;  // floats: a multiple of 4
  const size_t capacity = size_t{1} << kInitialLogCapacity;
  slots_.assign((capacity + 1) * slot_bytes_, 0);
  if (shares_rows_) blocks_.assign(capacity + 1, nullptr);
  SetCapacity(capacity);
}

void ParameterTable::SetScale() {
  // capacity * 2^64 / (range size), the range size being up to 2^64.
  const unsigned __int128 span = static_cast<unsigned __int128>(last_key_ - first_key_) + 1;
  const unsigned __int128 scale = (static_cast<unsigned __int128>(capacity_) << 64) / span;
  // A range of no more keys than slots: nearly a key per slot (key - 1).
  scale_ = scale > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(scale);
  if (scale_ == 0) scale_ = 1;
}

void ParameterTable::SetCapacity(size_t capacity) {
  capacity_ = capacity;
  SetScale();
  for (size_t i = 0; i <= capacity; ++i) SetKey(i, kFree);
}

void ParameterTable::InitialWeights(Key key, float* weights) const {
  std::memset(weights, 0, sizeof(float) * weight_width_);
  if (initializer_) initializer_(key, weights, weight_width_);
}

void ParameterTable::CreateRow(size_t index, Key key) {
  if (shares_rows_) {
    std::shared_ptr<float[]> block(new float[row_width_]);
    std::memset(block.get(), 0, sizeof(float) * row_width_);
    InitialWeights(key, block.get());
    blocks_[index] = std::move(block);
  } else {
    float* row = reinterpret_cast<float*>(SlotAt(index) + sizeof(Key));
    std::memset(row, 0, sizeof(float) * row_width_);
    InitialWeights(key, row);  // a free slot's row is never read: a throw leaves it free
  }
  if (key == kFree) {
    has_free_key_ = true;
  } else {
    SetKey(index, key);
  }
  Stamp(index);
  ++size_;
}

size_t ParameterTable::FindOrInsertIndex(Key key) {
  if (key == kFree) {
    if (!has_free_key_) CreateRow(capacity_, key);
    return capacity_;
  }
  const size_t home = SlotOf(key);
  for (size_t i = home;; i = NextSlot(i)) {
    const Key slot_key = KeyAt(i);
    if (slot_key == key) return i;
    if (slot_key == kFree) {
      if (Overloaded(size_ + 1, capacity_)) {
        Grow();
        return FindOrInsertIndex(key);
      }
      const size_t probed = i >= home ? i - home : i + capacity_ - home;
      if (ordered_ && (probed > kMaxOrderedProbe ||
                       OrderedTooCostly(ordered_probes_ + probed, ordered_rows_ + 1))) {
        // Clustered keys: the ordered layout no longer pays.
        Rebuild(capacity_, /*ordered=*/false);
        return FindOrInsertIndex(key);
      }
      CreateRow(i, key);
      probes_ += probed;
      ordered_probes_ += probed;
      ++ordered_rows_;
      return i;
    }
  }
}

float* ParameterTable::MutableRow(size_t index) {
  if (!shares_rows_) return reinterpret_cast<float*>(SlotAt(index) + sizeof(Key));
  std::shared_ptr<float[]>& block = blocks_[index];
  if (block.use_count() > 1) {
    // A pull's response still references this row: leave it to that reader.
    std::shared_ptr<float[]> copy(new float[row_width_]);
    std::memcpy(copy.get(), block.get(), sizeof(float) * row_width_);
    block = std::move(copy);
  } else {
    // The last reader released the block (its release pairs with this acquire)
    // and no new one can appear: only this thread hands out references.
    std::atomic_thread_fence(std::memory_order_acquire);
  }
  return block.get();
}

float* ParameterTable::FindOrInsert(Key key) {
  const size_t index = FindOrInsertIndex(key);
  Stamp(index);
  return MutableRow(index);
}

size_t ParameterTable::FindIndex(Key key) const {
  if (key == kFree) return has_free_key_ ? capacity_ : kNoSlot;
  for (size_t i = SlotOf(key);; i = NextSlot(i)) {
    const Key slot_key = KeyAt(i);
    if (slot_key == key) return i;
    if (slot_key == kFree) return kNoSlot;
  }
}

const float* ParameterTable::Find(Key key) const {
  const size_t index = FindIndex(key);
  return index == kNoSlot ? nullptr : Row(index);
}

SharedArray<const float> ParameterTable::SharedWeights(Key key) const {
  if (!shares_rows_) throw MakeError("rows of width ", row_width_, " are not shared");
  const size_t index = FindIndex(key);
  if (index == kNoSlot) {
    auto initial = SharedArray<float>::Allocate(static_cast<size_t>(weight_width_));
    InitialWeights(key, initial.data());
    return initial;
  }
  const std::shared_ptr<float[]>& block = blocks_[index];
  return SharedArray<const float>(block, block.get(), static_cast<size_t>(weight_width_));
}

void ParameterTable::Rebuild(size_t capacity, bool ordered) {
  // Everything that allocates comes first.
  std::vector<char, HugePageAllocator<char>> new_slots((capacity + 1) * slot_bytes_, 0);
  std::vector<std::shared_ptr<float[]>> new_blocks(shares_rows_ ? capacity + 1 : 0);
  std::vector<uint32_t> new_stamps(stamps_.empty() ? 0 : capacity + 1, 0);
  ++generation_;
  const size_t old_capacity = capacity_;
  const auto old_slots = std::move(slots_);
  const auto old_blocks = std::move(blocks_);
  const auto old_stamps = std::move(stamps_);
  slots_ = std::move(new_slots);
  blocks_ = std::move(new_blocks);
  stamps_ = std::move(new_stamps);
  // Rows are copied, not moved, so that an ordered layout that turns out too
  // costly is given up and the rows laid out again by hash.
  auto copy_slot = [&](size_t from, size_t to) {
    std::memcpy(SlotAt(to), old_slots.data() + from * slot_bytes_, slot_bytes_);
    if (shares_rows_) blocks_[to] = old_blocks[from];
    if (!stamps_.empty()) stamps_[to] = old_stamps[from];
  };
  // Lays the rows out; false if the ordered layout was given up part way.
  auto lay_out = [&](bool in_order) {
    ordered_ = in_order;
    SetCapacity(capacity);
    std::fill(blocks_.begin(), blocks_.end(), nullptr);
    uint64_t probed = 0;
    for (size_t from = 0; from < old_capacity; ++from) {
      Key key;
      std::memcpy(&key, old_slots.data() + from * slot_bytes_, sizeof(Key));
      if (key == kFree) continue;
      const size_t home = SlotOf(key);
      size_t to = home;
      for (size_t run = 0; KeyAt(to) != kFree; to = NextSlot(to)) {
        ++probed;
        if (in_order && (++run > kMaxOrderedProbe || OrderedTooCostly(probed, size_))) {
          probes_ += probed;
          return false;
        }
      }
      copy_slot(from, to);
    }
    if (has_free_key_) copy_slot(old_capacity, capacity_);
    probes_ += probed;
    ordered_probes_ = probed;
    ordered_rows_ = size_;
    return true;
  };
  if (!lay_out(ordered)) lay_out(/*ordered=*/false);
}

void ParameterTable::Reserve(size_t more) {
  size_t capacity = capacity_;
  while (Overloaded(size_ + more + 1, capacity)) capacity = Grown(capacity);
  if (capacity != capacity_) Rebuild(capacity, ordered_);
}

void ParameterTable::Prefetch(Key key) const {
  // Every cache line of the home slot (a slot of 8 FTRL models spans three),
  // and at the table's load a key is often a slot or two past its home: the
  // lines up to the second slot after it when that is near. Offsets, so that
  // no pointer past the slots is formed.
  const size_t begin = static_cast<size_t>(SlotAt(SlotOf(key)) - slots_.data());
  const size_t reach = std::max(slot_bytes_, std::min(3 * slot_bytes_, size_t{128}));
  const size_t last = std::min(begin + reach, slots_.size()) - 1;
  // Up to 128 bytes span at most three lines: the first's, the one 64 bytes
  // on and the last's, fetched without a branch (how many lines they take
  // depends on the slot's alignment, which a branch would mispredict). Only
  // slots over 128 bytes take the loop, for all their lines.
  const char* slots = slots_.data();
  __builtin_prefetch(slots + begin);
  __builtin_prefetch(slots + std::min(begin + 64, last));
  __builtin_prefetch(slots + last);
  for (size_t line = begin + 128; line < last; line += 64) __builtin_prefetch(slots + line);
}

size_t ParameterTable::ProbeFrom(size_t home, Key key) const {
  size_t slot = home;
  for (Key at = KeyAt(slot); at != key && at != kFree; at = KeyAt(slot)) slot = NextSlot(slot);
  return slot;
}

template <typename Visit>
void ParameterTable::ForBatch(const Key* keys, size_t count, Visit visit) {
  for (size_t i = 0; i < count; ++i) {
    if (i + kPrefetchDistance < count) Prefetch(keys[i + kPrefetchDistance]);
    // A key with a row is found by probing on from its home slot (the
    // prefetched line, and usually the next); only a new key takes the full
    // path, which inserts it.
    const Key key = keys[i];
    const size_t slot = key == kFree ? capacity_ : ProbeFrom(SlotOf(key), key);
    visit(i, key != kFree && KeyAt(slot) == key ? slot : FindOrInsertIndex(key));
  }
}

template <typename Visit>
void ParameterTable::ForBatchFound(const Key* keys, size_t count, Visit visit) const {
  for (size_t i = 0; i < count; ++i) {
    if (i + kPrefetchDistance < count) Prefetch(keys[i + kPrefetchDistance]);
    const Key key = keys[i];
    if (key == kFree) {
      visit(i, FindIndex(key));
      continue;
    }
    const size_t slot = ProbeFrom(SlotOf(key), key);
    visit(i, KeyAt(slot) == key ? slot : kNoSlot);
  }
}

int ApplyThreads::PartsFor(size_t rows) const {
  if (!pool || !optimizers) return 1;
  const size_t most = std::min(static_cast<size_t>(pool->size()), optimizers->size() + 1);
  return static_cast<int>(std::max<size_t>(1, std::min(most, rows / kMinRowsPerPart)));
}

namespace {

// Steps rows[0, count) in `parts` parts on `threads` (ApplyThreads), part
// `part` through `step(begin, end, optimizer)`.
template <typename Step>
void StepInParts(const ApplyThreads& threads, int parts, size_t count, Optimizer* optimizer,
                 Step step) {
  threads.pool->Run([&](int part) {
    if (part >= parts) return;
    size_t begin, end;
    PartRange(count, parts, part, &begin, &end);
    step(begin, end, part == 0 ? optimizer : (*threads.optimizers)[part - 1].get());
  });
}

}  // namespace

void ParameterTable::ResolveRows(const Key* keys, size_t count, float** rows, uint32_t* slots) {
  size_t indices[kUpdateChunk];
  for (size_t begin = 0; begin < count;) {
    const size_t n = std::min(kUpdateChunk, count - begin);
    const uint64_t generation = generation_;
    // The probes alone first: a tight loop, prefetching ahead.
    ForBatch(keys + begin, n, [&](size_t i, size_t index) { indices[i] = index; });
    if (generation_ != generation) {
      // A rebuild moved the rows found before it, in this chunk and those
      // before; they all have rows now, so a second pass inserts nothing and
      // rebuilds nothing.
      begin = 0;
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      rows[begin + i] = MutableRow(indices[i]);
      Stamp(indices[i]);
    }
    if (slots) {
      for (size_t i = 0; i < n; ++i) slots[begin + i] = static_cast<uint32_t>(indices[i]);
    }
    begin += n;
  }
}

bool ParameterTable::Push(const Key* keys, size_t count, const float* gradients,
                          Optimizer* optimizer, float step_scale, const ApplyThreads* threads,
                          std::vector<uint32_t>* slots) {
  const size_t width = static_cast<size_t>(weight_width_);
  Reserve(count);
  const bool answer_slots = slots != nullptr && SlotsFit();
  if (slots) {
    slots->clear();
    if (answer_slots) slots->resize(count);
  }
  uint32_t* found = answer_slots ? slots->data() : nullptr;
  // Reserved: the push does not grow the table, but inserting may give up
  // the ordered layout part way, which moves the rows of the parts before.
  const uint64_t generation = generation_;
  const int parts = threads ? threads->PartsFor(count) : 1;
  if (parts > 1) {
    push_rows_.resize(count);
    // A rebuild part way makes ResolveRows find every row again.
    ResolveRows(keys, count, push_rows_.data(), found);
    float* const* rows = push_rows_.data();
    StepInParts(*threads, parts, count, optimizer,
                [&](size_t begin, size_t end, Optimizer* part_optimizer) {
                  part_optimizer->UpdateRows(rows + begin, gradients + begin * width, end - begin,
                                             weight_width_, step_scale);
                });
    return answer_slots;
  }
  float* rows[kUpdateChunk];
  for (size_t begin = 0; begin < count; begin += kUpdateChunk) {
    const size_t n = std::min(kUpdateChunk, count - begin);
    ResolveRows(keys + begin, n, rows, found ? found + begin : nullptr);
    optimizer->UpdateRows(rows, gradients + begin * width, n, weight_width_, step_scale);
  }
  if (!answer_slots) return false;
  if (generation_ != generation) return FindSlots(keys, count, slots);
  return true;
}

bool ParameterTable::Pull(const Key* keys, size_t count, float* out,
                          std::vector<uint32_t>* slots) const {
  const size_t width = static_cast<size_t>(weight_width_);
  const bool answer_slots = slots != nullptr && SlotsFit();
  if (slots) {
    slots->clear();
    if (answer_slots) slots->resize(count);
  }
  uint32_t* found = answer_slots ? slots->data() : nullptr;
  bool every_row = true;
  WithRowWidth(width, [&](auto fixed_width) {
    constexpr size_t kWidth = decltype(fixed_width)::value;
    ForBatchFound(keys, count, [&](size_t i, size_t slot) {
      float* to = out + i * width;
      if (found) found[i] = static_cast<uint32_t>(slot);
      if (slot == kNoSlot) {
        every_row = false;
        InitialWeights(keys[i], to);
      } else if constexpr (kWidth > 0) {
        std::memcpy(to, Row(slot), sizeof(float) * kWidth);
      } else {
        std::memcpy(to, Row(slot), sizeof(float) * width);
      }
    });
  });
  if (!answer_slots) return false;
  if (!every_row) slots->clear();
  return every_row;
}

void ParameterTable::ForEach(const std::function<void(Key, const float*)>& visit) const {
  for (size_t i = 0; i < capacity_; ++i) {
    if (KeyAt(i) != kFree) visit(KeyAt(i), Row(i));
  }
  if (has_free_key_) visit(kFree, Row(capacity_));
}

void ParameterTable::ForEachInSlots(size_t begin, size_t end,
                                    const std::function<void(Key, const float*)>& visit) const {
  for (size_t i = begin; i < std::min(end, capacity_); ++i) {
    if (KeyAt(i) != kFree) visit(KeyAt(i), Row(i));
  }
  if (end > capacity_ && has_free_key_) visit(kFree, Row(capacity_));
}

void ParameterTable::EnableStamps() {
  if (!stamps_.empty()) return;
  stamps_.assign(capacity_ + 1, stamp_);
}

void ParameterTable::ForEachChangedSince(
    uint32_t stamp, const std::function<void(Key, const float*)>& visit) const {
  if (stamps_.empty()) {
    ForEach(visit);
    return;
  }
  for (size_t i = 0; i < capacity_; ++i) {
    if (stamps_[i] > stamp && KeyAt(i) != kFree) visit(KeyAt(i), Row(i));
  }
  if (has_free_key_ && stamps_[capacity_] > stamp) visit(kFree, Row(capacity_));
}

std::vector<Key> ParameterTable::StampedBefore(uint32_t stamp) const {
  std::vector<Key> keys;
  if (stamps_.empty()) return keys;
  for (size_t i = 0; i < capacity_; ++i) {
    if (stamps_[i] < stamp && KeyAt(i) != kFree) keys.push_back(KeyAt(i));
  }
  if (has_free_key_ && stamps_[capacity_] < stamp) keys.push_back(kFree);
  return keys;
}

void ParameterTable::ForEachStamped(
    uint32_t since, const std::function<void(Key, const float*, uint32_t)>& visit) const {
  if (stamps_.empty()) {
    ForEach([&](Key key, const float* row) { visit(key, row, 0); });
    return;
  }
  for (size_t i = 0; i < capacity_; ++i) {
    if (stamps_[i] > since && KeyAt(i) != kFree) visit(KeyAt(i), Row(i), stamps_[i]);
  }
  if (has_free_key_ && stamps_[capacity_] > since) {
    visit(kFree, Row(capacity_), stamps_[capacity_]);
  }
}

void ParameterTable::SetStamp(Key key, uint32_t stamp) {
  const size_t index = FindIndex(key);
  if (index != kNoSlot && !stamps_.empty()) stamps_[index] = stamp;
}

bool ParameterTable::FindSlots(const Key* keys, size_t count, std::vector<uint32_t>* slots) const {
  slots->clear();
  if (!SlotsFit()) return false;
  slots->resize(count);
  for (size_t i = 0; i < count; ++i) {
    if (i + kPrefetchDistance < count) Prefetch(keys[i + kPrefetchDistance]);
    const size_t index = FindIndex(keys[i]);
    if (index == kNoSlot) {
      slots->clear();
      return false;
    }
    (*slots)[i] = static_cast<uint32_t>(index);
  }
  return true;
}

void ParameterTable::PrefetchSlot(size_t index) const {
  // Every line the slot touches, as Prefetch does: a slot of 8 FTRL models
  // (104 bytes) spans three lines at half of its alignments. Up to 128 bytes
  // without a branch: the first line's, the one 64 bytes on (or the last)
  // and the last's.
  const char* slot = SlotAt(index);
  const size_t last = slot_bytes_ - 1;
  __builtin_prefetch(slot, 1, 3);
  __builtin_prefetch(slot + std::min(size_t{64}, last), 1, 3);
  __builtin_prefetch(slot + last, 1, 3);
  for (size_t line = 128; line < last; line += 64) __builtin_prefetch(slot + line, 1, 3);
}

void ParameterTable::PushSlots(const uint32_t* slots, size_t count, const float* gradients,
                               Optimizer* optimizer, float step_scale,
                               const ApplyThreads* threads) {
  const int parts = threads ? threads->PartsFor(count) : 1;
  if (parts == 1) return PushSlotRange(slots, count, gradients, optimizer, step_scale);
  // Distinct slots: each part makes its own rows writable and stamps them.
  const size_t width = static_cast<size_t>(weight_width_);
  StepInParts(*threads, parts, count, optimizer,
              [&](size_t begin, size_t end, Optimizer* part_optimizer) {
                PushSlotRange(slots + begin, end - begin, gradients + begin * width, part_optimizer,
                              step_scale);
              });
}

void ParameterTable::PushSlotRange(const uint32_t* slots, size_t count, const float* gradients,
                                   Optimizer* optimizer, float step_scale) {
  const size_t width = static_cast<size_t>(weight_width_);
  float* rows[kUpdateChunk];
  for (size_t begin = 0; begin < count; begin += kUpdateChunk) {
    const size_t n = std::min(kUpdateChunk, count - begin);
    for (size_t i = 0; i < n; ++i) {
      const size_t at = begin + i;
      if (at + kPrefetchDistance < count) PrefetchSlot(slots[at + kPrefetchDistance]);
      rows[i] = MutableRow(slots[at]);
      Stamp(slots[at]);
    }
    optimizer->UpdateRows(rows, gradients + begin * width, n, weight_width_, step_scale);
  }
}

void ParameterTable::PullSlots(const uint32_t* slots, size_t count, float* out) const {
  const size_t width = static_cast<size_t>(weight_width_);
  WithRowWidth(width, [&](auto fixed_width) {
    constexpr size_t kWidth = decltype(fixed_width)::value;
    for (size_t i = 0; i < count; ++i) {
      if (i + kPrefetchDistance < count) PrefetchSlot(slots[i + kPrefetchDistance]);
      if constexpr (kWidth > 0) {
        std::memcpy(out + i * kWidth, Row(slots[i]), sizeof(float) * kWidth);
      } else {
        std::memcpy(out + i * width, Row(slots[i]), sizeof(float) * width);
      }
    }
  });
}

void ParameterTable::MoveSlot(size_t from, size_t to) {
  std::memcpy(SlotAt(to), SlotAt(from), slot_bytes_);
  if (shares_rows_) blocks_[to] = std::move(blocks_[from]);
  if (!stamps_.empty()) stamps_[to] = stamps_[from];
  SetKey(from, kFree);
}

bool ParameterTable::Erase(Key key) {
  if (key == kFree) {
    if (!has_free_key_) return false;
    has_free_key_ = false;
    if (shares_rows_) blocks_[capacity_].reset();
    --size_;
    return true;
  }
  size_t hole = FindIndex(key);
  if (hole == kNoSlot) return false;
  ++erasures_;  // rows after it may move back
  SetKey(hole, kFree);
  if (shares_rows_) blocks_[hole].reset();
  --size_;
  // Backward shift: each key after the hole in its probe run moves into the
  // hole unless its home slot lies after the hole (cyclically), so every key
  // stays reachable from its home without tombstones.
  for (size_t next = NextSlot(hole);; next = NextSlot(next)) {
    const Key moving = KeyAt(next);
    if (moving == kFree) break;
    const size_t home = SlotOf(moving);
    const size_t from_home = next >= home ? next - home : next + capacity_ - home;
    const size_t hole_from_home = hole >= home ? hole - home : hole + capacity_ - home;
    if (hole_from_home > from_home) continue;  // the hole is before its home
    MoveSlot(next, hole);
    hole = next;
  }
  return true;
}

}  // namespace keel
