#include "models/score_order.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace keel {
namespace {

// Below this many examples a comparison sort is as fast as the radix sort's
// four histograms.
constexpr size_t kRadixFrom = 512;

// A float's bits as an unsigned key in the float's order: negative floats
// (sign set) have every bit flipped, others the sign bit set. -0 and +0, equal
// as floats, get adjacent keys (0x7fffffff, 0x80000000): side by side.
uint32_t OrderKey(float score) {
  uint32_t bits;
  std::memcpy(&bits, &score, sizeof bits);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

float FromOrderKey(uint32_t key) {
  const uint32_t bits = (key & 0x80000000u) != 0 ? key & 0x7fffffffu : ~key;
  float score;
  std::memcpy(&score, &bits, sizeof score);
  return score;
}

}  // namespace

void SortByScore(std::vector<ScoredExample>* examples, bool descending) {
  const size_t n = examples->size();
  if (n < kRadixFrom) {
    std::sort(examples->begin(), examples->end(),
              [](const ScoredExample& a, const ScoredExample& b) { return a.score < b.score; });
  } else {
    // Each example as its key in the upper 32 bits and its flag in bit 0,
    // sorted a byte of the key at a time, lowest byte first (each pass
    // stable); a byte every example shares is skipped.
    std::vector<uint64_t> packed(n), spare(n);
    for (size_t i = 0; i < n; ++i) {
      const ScoredExample& e = (*examples)[i];
      packed[i] = uint64_t{OrderKey(e.score)} << 32 | (e.positive ? 1u : 0u);
    }
    std::array<std::array<size_t, 256>, 4> counts{};
    for (const uint64_t value : packed) {
      for (int b = 0; b < 4; ++b) ++counts[b][(value >> (32 + 8 * b)) & 0xff];
    }
    for (int b = 0; b < 4; ++b) {
      std::array<size_t, 256>& count = counts[b];
      const int shift = 32 + 8 * b;
      if (count[(packed[0] >> shift) & 0xff] == n) continue;
      size_t offset = 0;
      for (size_t& c : count) {
        const size_t here = c;
        c = offset;
        offset += here;
      }
      for (const uint64_t value : packed) spare[count[(value >> shift) & 0xff]++] = value;
      packed.swap(spare);
    }
    for (size_t i = 0; i < n; ++i) {
      (*examples)[i] = {FromOrderKey(static_cast<uint32_t>(packed[i] >> 32)),
                        (packed[i] & 1u) != 0};
    }
  }
  if (descending) std::reverse(examples->begin(), examples->end());
}

}  // namespace keel
