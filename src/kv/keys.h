// Keys, the key mix, and the map from key ranges to servers.
#ifndef KEEL_KV_KEYS_H_
#define KEEL_KV_KEYS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "keel.pb.h"

namespace keel {

using Key = uint64_t;

// The most key ranges a job may have (--key_ranges): each is one request per
// push or pull that touches it.
constexpr int kMaxKeyRanges = 16384;

// A fixed invertible 64-bit mix (a bijection on uint64). Feature indices go
// through it before routing so that contiguous ranges of the key space carry
// even load however skewed the raw indices are.
Key MixKey(uint64_t feature_index);
// The inverse of MixKey: UnmixKey(MixKey(x)) == x for every x.
uint64_t UnmixKey(Key key);

// Mixes `feature_indices`, then sorts and removes duplicates: the key set a
// minibatch pulls and pushes.
std::vector<Key> MixedKeySet(const std::vector<uint64_t>& feature_indices);

// The key space [0, 2^64) split into contiguous ranges, each held by a chain
// of servers: its primary (serves pulls, takes pushes first) and, with
// replication, its backups in chain order. Immutable; safe for concurrent reads.
class RangeMap {
 public:
  RangeMap() = default;
  // `num_ranges` equal ranges (0: one per server), range i on server
  // s = i mod num_servers, backed up (chain replication) by the next
  // `replication` servers: s + 1, ..., s + k (mod num_servers). Throws Error
  // unless 0 <= replication < num_servers and num_ranges (if given) is at
  // least num_servers and at most kMaxKeyRanges.
  static RangeMap Even(int num_servers, int replication = 0, int num_ranges = 0);
  // Where range `range` of `num_ranges` even ones begins (Even's begins,
  // whatever the servers).
  static Key EvenBegin(size_t range, size_t num_ranges);
  // From a view's ranges (sorted by begin, the first at 0). Throws Error if malformed.
  static RangeMap FromProto(const google::protobuf::RepeatedPtrField<proto::KeyRange>& ranges);
  void ToProto(google::protobuf::RepeatedPtrField<proto::KeyRange>* ranges) const;

  size_t num_ranges() const { return begins_.size(); }
  Key begin(size_t range) const { return begins_[range]; }
  // The last key of `range`, inclusive.
  Key last(size_t range) const;
  // The primary's rank.
  int server(size_t range) const { return servers_[range]; }
  // The backups' ranks, in chain order.
  const std::vector<int>& backups(size_t range) const { return backups_[range]; }
  // The primary, then the backups.
  std::vector<int> Chain(size_t range) const;
  // Whether server `rank` holds a replica of `range` (primary or backup).
  bool Holds(size_t range, int rank) const;
  // The rank after `rank` in `range`'s chain; -1 if `rank` is its last.
  int Successor(size_t range, int rank) const;
  // The rank before `rank` in `range`'s chain; -1 if `rank` is its primary.
  int Predecessor(size_t range, int rank) const;
  // A copy with `range`'s chain set to `chain` (primary first; not empty).
  RangeMap WithChain(size_t range, const std::vector<int>& chain) const;
  // Sets `range`'s chain to `chain` (primary first; not empty) in place: a
  // loop over the ranges that copied the map for each took O(ranges^2).
  void SetChain(size_t range, const std::vector<int>& chain);
  // The range holding `key`.
  size_t RangeOf(Key key) const;

  // For sorted `keys`, the positions where each range's keys start:
  // range r holds keys[bounds[r], bounds[r + 1]). Returns num_ranges() + 1 entries.
  std::vector<size_t> Split(const Key* keys, size_t count) const;

 private:
  std::vector<Key> begins_;
  std::vector<int> servers_;
  std::vector<std::vector<int>> backups_;
};

}  // namespace keel

#endif  // KEEL_KV_KEYS_H_
