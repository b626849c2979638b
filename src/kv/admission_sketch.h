// AdmissionSketch: how often each key without a row was pushed, counted in a
// count-min sketch (`depth` rows of `width` saturating 16-bit counters, a key
// hashed to one counter a row; its count is the least of them, never below
// the truth) with conservative update (only the counters at that least are
// raised), so a key admitted after N pushes costs no row before it, and the
// sketch's bytes are fixed however many keys come. Not synchronized.
#ifndef KEEL_KV_ADMISSION_SKETCH_H_
#define KEEL_KV_ADMISSION_SKETCH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/keys.h"

namespace keel {

class AdmissionSketch {
 public:
  static constexpr uint32_t kDepth = 4;
  // Counters per row: `bytes` of counters in all, at least 1024 a row.
  static uint32_t WidthFor(uint64_t bytes);

  explicit AdmissionSketch(uint32_t width);
  // From saved counters (depth x width); throws Error if they do not fit.
  AdmissionSketch(uint32_t depth, uint32_t width, std::vector<uint16_t> counters);

  uint32_t depth() const { return kDepth; }
  uint32_t width() const { return width_; }
  const std::vector<uint16_t>& counters() const { return counters_; }
  size_t memory_bytes() const { return counters_.size() * sizeof(uint16_t); }

  // Counts one push of `key`; returns its count since, this one included.
  uint32_t Add(Key key);
  // Its count so far.
  uint32_t Count(Key key) const;
  // Adds `other`'s counts (same shape; saturating): the sketch of both streams.
  void Merge(const AdmissionSketch& other);

 private:
  size_t Slot(uint32_t row, Key key) const;

  uint32_t width_;
  std::vector<uint16_t> counters_;  // row-major, kDepth x width_
};

}  // namespace keel

#endif  // KEEL_KV_ADMISSION_SKETCH_H_
