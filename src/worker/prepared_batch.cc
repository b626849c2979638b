#include "worker/prepared_batch.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace keel {

namespace {

using MixedNonZero = std::pair<Key, uint32_t>;  // (MixKey(feature), non-zero)

// Buckets of a few pairs each this large at most are sorted by insertion.
constexpr uint32_t kInsertionSortMax = 32;

// The pairs of `indices`' mixed keys and positions in ascending order, as
// std::sort gives them, in about linear time: MixKey spreads keys evenly over
// 64 bits, so a scatter by their top bits into n/4 to n/2 buckets leaves a
// few pairs in each, sorted by insertion. A bucket that holds more (a common
// feature's many non-zeros beside another key) is sorted by std::sort, so no
// input takes more than n log n.
std::vector<MixedNonZero> SortedMixedKeys(const std::vector<uint64_t>& indices) {
  const size_t n = indices.size();
  std::vector<MixedNonZero> sorted(n);
  if (n < 512) {
    for (size_t i = 0; i < n; ++i) sorted[i] = {MixKey(indices[i]), static_cast<uint32_t>(i)};
    std::sort(sorted.begin(), sorted.end());
    return sorted;
  }
  int bits = 8;
  while (bits < 20 && (size_t{2} << (bits + 1)) <= n) ++bits;
  const int shift = 64 - bits;
  std::vector<Key> keys(n);
  std::vector<uint32_t> starts((size_t{1} << bits) + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = MixKey(indices[i]);
    ++starts[(keys[i] >> shift) + 1];
  }
  for (size_t b = 1; b < starts.size(); ++b) starts[b] += starts[b - 1];
  std::vector<uint32_t> next(starts.begin(), starts.end() - 1);
  // In ascending order of non-zero within each bucket.
  for (size_t i = 0; i < n; ++i)
    sorted[next[keys[i] >> shift]++] = {keys[i], static_cast<uint32_t>(i)};
  for (size_t b = 0; b + 1 < starts.size(); ++b) {
    const uint32_t begin = starts[b];
    const uint32_t end = starts[b + 1];
    if (end - begin > kInsertionSortMax) {
      std::sort(sorted.begin() + begin, sorted.begin() + end);
      continue;
    }
    for (uint32_t i = begin + 1; i < end; ++i) {
      const MixedNonZero pair = sorted[i];
      uint32_t j = i;
      for (; j > begin && pair < sorted[j - 1]; --j) sorted[j] = sorted[j - 1];
      sorted[j] = pair;
    }
  }
  return sorted;
}

}  // namespace

void PrepareKeys(PreparedBatch* prepared) {
  const auto& indices = prepared->batch.indices;
  const std::vector<MixedNonZero> mixed = SortedMixedKeys(indices);
  std::vector<Key> keys;
  keys.reserve(mixed.size());
  prepared->positions.resize(indices.size());
  prepared->key_offsets.clear();
  prepared->nonzeros_by_key.resize(indices.size());
  // Sorted by (key, non-zero): each key's non-zeros come out in ascending order.
  for (size_t i = 0; i < mixed.size(); ++i) {
    const auto& [key, nonzero] = mixed[i];
    if (keys.empty() || keys.back() != key) {
      keys.push_back(key);
      prepared->key_offsets.push_back(static_cast<uint32_t>(i));
    }
    prepared->positions[nonzero] = static_cast<uint32_t>(keys.size() - 1);
    prepared->nonzeros_by_key[i] = nonzero;
  }
  prepared->key_offsets.push_back(static_cast<uint32_t>(mixed.size()));
  prepared->keys = SharedArray<const Key>(std::move(keys));
}

}  // namespace keel
