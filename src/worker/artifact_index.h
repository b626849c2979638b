// ArtifactIndex: a model artifact's rows found by the mixed keys a batch
// carries (kv/keys.h), for scoring from the artifact (worker/scorer.h,
// worker/evaluator.cc).
//
// Open addressing from the mixed key's top bits (MixKey spreads them
// evenly), at most half full. A slot holds a row number (4 bytes below
// 2^32 - 1 features, else 8) and a probe compares the feature in the
// artifact: 8-16 bytes a feature beside the model, where a hash map of key
// and row took about 48. A feature listed twice finds its last row.
//
// Threading: immutable once built; Find may be called from any thread. The
// features must outlive it, unchanged.
#ifndef KEEL_WORKER_ARTIFACT_INDEX_H_
#define KEEL_WORKER_ARTIFACT_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/keys.h"

namespace keel {

class ArtifactIndex {
 public:
  static constexpr size_t kNoRow = ~size_t{0};

  // Indexes `features` (the artifact's, in its row order).
  explicit ArtifactIndex(const std::vector<uint64_t>& features);

  // The row of the feature whose mixed key is `key`, or kNoRow.
  size_t Find(Key key) const { return narrow_.empty() ? Find(wide_, key) : Find(narrow_, key); }

 private:
  // Slot values are row + 1; 0 is an empty slot.
  template <typename Row>
  void Fill(std::vector<Row>* slots);
  template <typename Row>
  size_t Find(const std::vector<Row>& slots, Key key) const {
    const uint64_t feature = UnmixKey(key);
    for (size_t slot = key >> shift_; slots[slot] != 0; slot = (slot + 1) & mask_) {
      if (features_[slots[slot] - 1] == feature) return slots[slot] - 1;
    }
    return kNoRow;
  }

  const std::vector<uint64_t>& features_;
  int shift_ = 0;
  size_t mask_ = 0;
  // One of the two is filled.
  std::vector<uint32_t> narrow_;
  std::vector<uint64_t> wide_;
};

}  // namespace keel

#endif  // KEEL_WORKER_ARTIFACT_INDEX_H_
