#include "kv/admission_sketch.h"

#include <algorithm>

#include "base/error.h"

namespace keel {
namespace {

// One odd multiplier a row: the rows' hashes of a key are independent enough
// for keys that are mixed already (MixKey).
constexpr uint64_t kMultipliers[AdmissionSketch::kDepth] = {
    0x9E3779B97F4A7C15ULL, 0xC2B2AE3D27D4EB4FULL, 0x165667B19E3779F9ULL, 0xD6E8FEB86659FD93ULL};
constexpr uint32_t kMinWidth = 1024;
// 4 rows of 2^26: 2^28 counters (512 MiB), what a checkpoint may carry.
constexpr uint64_t kMaxWidth = uint64_t{1} << 26;

}  // namespace

uint32_t AdmissionSketch::WidthFor(uint64_t bytes) {
  const uint64_t width = bytes / (kDepth * sizeof(uint16_t));
  return static_cast<uint32_t>(std::clamp<uint64_t>(width, kMinWidth, kMaxWidth));
}

AdmissionSketch::AdmissionSketch(uint32_t width)
    : width_(std::max(width, kMinWidth)), counters_(size_t{kDepth} * width_, 0) {}

AdmissionSketch::AdmissionSketch(uint32_t depth, uint32_t width, std::vector<uint16_t> counters)
    : width_(width), counters_(std::move(counters)) {
  if (depth != kDepth || width < kMinWidth || width > kMaxWidth ||
      counters_.size() != size_t{depth} * width) {
    throw MakeError("admission counters of ", depth, " x ", width, " (", counters_.size(),
                    " counters) do not fit a sketch of ", kDepth, " rows of ", kMinWidth, " to ",
                    kMaxWidth);
  }
}

size_t AdmissionSketch::Slot(uint32_t row, Key key) const {
  const uint64_t hash = (key ^ (key >> 29)) * kMultipliers[row];
  return size_t{row} * width_ +
         static_cast<size_t>((static_cast<unsigned __int128>(hash) * width_) >> 64);
}

uint32_t AdmissionSketch::Count(Key key) const {
  uint32_t least = UINT16_MAX;
  for (uint32_t row = 0; row < kDepth; ++row) {
    least = std::min<uint32_t>(least, counters_[Slot(row, key)]);
  }
  return least;
}

uint32_t AdmissionSketch::Add(Key key) {
  size_t slots[kDepth];
  uint32_t least = UINT16_MAX;
  for (uint32_t row = 0; row < kDepth; ++row) {
    slots[row] = Slot(row, key);
    least = std::min<uint32_t>(least, counters_[slots[row]]);
  }
  if (least == UINT16_MAX) return least;
  const uint32_t count = least + 1;
  for (size_t slot : slots) {
    if (counters_[slot] < count) counters_[slot] = static_cast<uint16_t>(count);
  }
  return count;
}

void AdmissionSketch::Merge(const AdmissionSketch& other) {
  if (other.width_ != width_) {
    throw MakeError("cannot merge admission counters of width ", other.width_, " into ", width_);
  }
  for (size_t i = 0; i < counters_.size(); ++i) {
    counters_[i] = static_cast<uint16_t>(
        std::min<uint32_t>(UINT16_MAX, uint32_t{counters_[i]} + other.counters_[i]));
  }
}

}  // namespace keel
