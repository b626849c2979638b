// ParameterTable: the rows of one table on one server.
//
// An open-addressing hash table (linear probing, Fibonacci hashing) whose slots
// hold a key and the index of its row; rows are fixed-width float arrays kept
// contiguously in one arena (weights, then the optimizer's state). No heap
// allocation per key: the slot array and the arena grow by doubling.
// Not synchronized: a server touches a table from one thread.
#ifndef KEEL_KV_PARAMETER_TABLE_H_
#define KEEL_KV_PARAMETER_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "kv/keys.h"
#include "kv/optimizer.h"

namespace keel {

class ParameterTable {
 public:
  // Fills a new row's weights (the state is zeroed by the table). The default
  // leaves weights at zero.
  using Initializer = std::function<void(Key key, float* weights, int width)>;

  ParameterTable(int weight_width, int state_width, Initializer initializer = nullptr);

  int weight_width() const { return weight_width_; }
  int row_width() const { return row_width_; }
  size_t size() const { return size_; }
  size_t capacity() const { return slots_.size(); }

  // The row of `key`, created on first touch. Valid until the next insertion.
  float* FindOrInsert(Key key);
  // The row of `key`, or nullptr if it was never touched.
  const float* Find(Key key) const;

  // Applies gradients (keys.size() x weight_width, row-major) to the rows of
  // `keys` through `optimizer`, creating rows on first touch.
  void Push(const Key* keys, size_t count, const float* gradients, Optimizer* optimizer);
  // Copies the weights of `keys` into `out` (count x weight_width), creating
  // rows on first touch.
  void Pull(const Key* keys, size_t count, float* out);

  // Calls visit(key, row) for every row, in no particular order.
  void ForEach(const std::function<void(Key, const float*)>& visit) const;

 private:
  struct Slot {
    Key key;
    uint64_t row;  // kEmpty when free
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  size_t SlotOf(Key key) const { return (key * 0x9E3779B97F4A7C15ULL) >> shift_; }
  float* Row(uint64_t row) { return rows_.data() + row * row_width_; }
  void Grow();
  template <typename Visit>
  void ForBatch(const Key* keys, size_t count, Visit visit);

  int weight_width_;
  int row_width_;
  Initializer initializer_;
  std::vector<Slot> slots_;
  int shift_;  // 64 - log2(capacity)
  size_t size_ = 0;
  std::vector<float> rows_;
};

}  // namespace keel

#endif  // KEEL_KV_PARAMETER_TABLE_H_
