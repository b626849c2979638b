#include "kv/parameter_table.h"

#include <cstring>

#include "kv/error.h"

namespace keel {
namespace {

constexpr size_t kInitialCapacity = 1024;
constexpr int kInitialShift = 64 - 10;
// Rows are prefetched this many keys ahead of the one being updated.
constexpr size_t kPrefetchDistance = 16;

}  // namespace

ParameterTable::ParameterTable(int weight_width, int state_width, Initializer initializer)
    : weight_width_(weight_width),
      row_width_(weight_width + state_width),
      initializer_(std::move(initializer)),
      slots_(kInitialCapacity, Slot{0, kEmpty}),
      shift_(kInitialShift) {
  if (weight_width <= 0 || state_width < 0) {
    throw MakeError("a table needs a positive row width, got ", weight_width, " weights + ",
                    state_width, " state");
  }
}

float* ParameterTable::FindOrInsert(Key key) {
  const size_t mask = slots_.size() - 1;
  for (size_t i = SlotOf(key);; i = (i + 1) & mask) {
    Slot& slot = slots_[i];
    if (slot.row == kEmpty) {
      if (2 * (size_ + 1) > slots_.size()) {
        Grow();
        return FindOrInsert(key);
      }
      slot.key = key;
      slot.row = size_++;
      rows_.resize(size_ * row_width_);
      float* row = Row(slot.row);
      std::memset(row, 0, sizeof(float) * row_width_);
      if (initializer_) initializer_(key, row, weight_width_);
      return row;
    }
    if (slot.key == key) return Row(slot.row);
  }
}

const float* ParameterTable::Find(Key key) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = SlotOf(key);; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.row == kEmpty) return nullptr;
    if (slot.key == key) return rows_.data() + slot.row * row_width_;
  }
}

void ParameterTable::Grow() {
  std::vector<Slot> old(slots_.size() * 2, Slot{0, kEmpty});
  old.swap(slots_);
  --shift_;
  const size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.row == kEmpty) continue;
    size_t i = SlotOf(slot.key);
    while (slots_[i].row != kEmpty) i = (i + 1) & mask;
    slots_[i] = slot;
  }
}

template <typename Visit>
void ParameterTable::ForBatch(const Key* keys, size_t count, Visit visit) {
  for (size_t i = 0; i < count; ++i) {
    if (i + kPrefetchDistance < count) {
      __builtin_prefetch(&slots_[SlotOf(keys[i + kPrefetchDistance])]);
    }
    visit(i, FindOrInsert(keys[i]));
  }
}

void ParameterTable::Push(const Key* keys, size_t count, const float* gradients,
                          Optimizer* optimizer) {
  const int width = weight_width_;
  ForBatch(keys, count, [&](size_t i, float* row) {
    optimizer->Update(row, gradients + i * width, width);
  });
}

void ParameterTable::Pull(const Key* keys, size_t count, float* out) {
  const int width = weight_width_;
  ForBatch(keys, count, [&](size_t i, float* row) {
    std::memcpy(out + i * width, row, sizeof(float) * width);
  });
}

void ParameterTable::ForEach(const std::function<void(Key, const float*)>& visit) const {
  for (const Slot& slot : slots_) {
    if (slot.row != kEmpty) visit(slot.key, rows_.data() + slot.row * row_width_);
  }
}

}  // namespace keel
