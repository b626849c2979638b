// Keys, the key mix, and the map from key ranges to servers.
#ifndef KEEL_KV_KEYS_H_
#define KEEL_KV_KEYS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "keel.pb.h"

namespace keel {

using Key = uint64_t;

// A fixed invertible 64-bit mix (a bijection on uint64). Feature indices go
// through it before routing so that contiguous ranges of the key space carry
// even load however skewed the raw indices are.
Key MixKey(uint64_t feature_index);
// The inverse of MixKey: UnmixKey(MixKey(x)) == x for every x.
uint64_t UnmixKey(Key key);

// Mixes `feature_indices`, then sorts and removes duplicates: the key set a
// minibatch pulls and pushes.
std::vector<Key> MixedKeySet(const std::vector<uint64_t>& feature_indices);

// The key space [0, 2^64) split into contiguous ranges, each served by one
// server. Immutable; safe for concurrent reads.
class RangeMap {
 public:
  RangeMap() = default;
  // `num_servers` equal ranges, range i on server i.
  static RangeMap Even(int num_servers);
  // From a view's ranges (sorted by begin, the first at 0). Throws Error if malformed.
  static RangeMap FromProto(const google::protobuf::RepeatedPtrField<proto::KeyRange>& ranges);
  void ToProto(google::protobuf::RepeatedPtrField<proto::KeyRange>* ranges) const;

  size_t num_ranges() const { return begins_.size(); }
  Key begin(size_t range) const { return begins_[range]; }
  // The last key of `range`, inclusive.
  Key last(size_t range) const;
  int server(size_t range) const { return servers_[range]; }
  // The range holding `key`.
  size_t RangeOf(Key key) const;

  // For sorted `keys`, the positions where each range's keys start:
  // range r holds keys[bounds[r], bounds[r + 1]). Returns num_ranges() + 1 entries.
  std::vector<size_t> Split(const Key* keys, size_t count) const;

 private:
  std::vector<Key> begins_;
  std::vector<int> servers_;
};

}  // namespace keel

#endif  // KEEL_KV_KEYS_H_
