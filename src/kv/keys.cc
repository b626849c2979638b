#include "kv/keys.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

namespace keel {
namespace {

// The splitmix64 finalizer: xor-shifts and odd multipliers, each invertible.
constexpr uint64_t kMul1 = 0xbf58476d1ce4e5b9ULL;
constexpr uint64_t kMul2 = 0x94d049bb133111ebULL;

// The multiplicative inverse of an odd number modulo 2^64 (Newton's iteration).
constexpr uint64_t InverseOf(uint64_t a) {
  uint64_t x = a;  // correct to 3 bits for odd a
  for (int i = 0; i < 5; ++i) x *= 2 - a * x;
  return x;
}
constexpr uint64_t kInv1 = InverseOf(kMul1);
constexpr uint64_t kInv2 = InverseOf(kMul2);
static_assert(kMul1 * kInv1 == 1 && kMul2 * kInv2 == 1, "inverse multipliers");

// Inverts x ^= x >> shift.
uint64_t UnXorShift(uint64_t y, int shift) {
  uint64_t x = y;
  for (int done = shift; done < 64; done += shift) x = y ^ (x >> shift);
  return x;
}

}  // namespace

Key MixKey(uint64_t x) {
  x ^= x >> 30;
  x *= kMul1;
  x ^= x >> 27;
  x *= kMul2;
  x ^= x >> 31;
  return x;
}

uint64_t UnmixKey(Key x) {
  x = UnXorShift(x, 31);
  x *= kInv2;
  x = UnXorShift(x, 27);
  x *= kInv1;
  x = UnXorShift(x, 30);
  return x;
}

std::vector<Key> MixedKeySet(const std::vector<uint64_t>& feature_indices) {
  std::vector<Key> keys(feature_indices.size());
  std::transform(feature_indices.begin(), feature_indices.end(), keys.begin(), MixKey);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

RangeMap RangeMap::Even(int num_servers, int replication, int num_ranges) {
  if (num_servers <= 0) throw MakeError("a range map needs at least one server, got ", num_servers);
  if (replication < 0 || replication >= num_servers) {
    throw MakeError("replication ", replication,
                    " needs 0 <= replication < the number of servers (", num_servers,
                    "): each range's backups are other servers");
  }
  if (num_ranges == 0) num_ranges = num_servers;
  if (num_ranges < num_servers || num_ranges > kMaxKeyRanges) {
    throw MakeError("key ranges ", num_ranges, " must be between the number of servers (",
                    num_servers, ") and ", kMaxKeyRanges, ": each server holds at least one");
  }
  RangeMap map;
  for (int i = 0; i < num_ranges; ++i) {
    const int server = i % num_servers;
    map.begins_.push_back(EvenBegin(static_cast<size_t>(i), static_cast<size_t>(num_ranges)));
    map.servers_.push_back(server);
    std::vector<int> backups;
    for (int b = 1; b <= replication; ++b) backups.push_back((server + b) % num_servers);
    map.backups_.push_back(std::move(backups));
  }
  return map;
}

Key RangeMap::EvenBegin(size_t range, size_t num_ranges) {
  return std::numeric_limits<Key>::max() / static_cast<Key>(num_ranges) * static_cast<Key>(range);
}

std::vector<int> RangeMap::Chain(size_t range) const {
  std::vector<int> chain = {servers_[range]};
  chain.insert(chain.end(), backups_[range].begin(), backups_[range].end());
  return chain;
}

bool RangeMap::Holds(size_t range, int rank) const {
  return servers_[range] == rank ||
         std::find(backups_[range].begin(), backups_[range].end(), rank) != backups_[range].end();
}

int RangeMap::Successor(size_t range, int rank) const {
  const std::vector<int> chain = Chain(range);
  auto it = std::find(chain.begin(), chain.end(), rank);
  return it == chain.end() || it + 1 == chain.end() ? -1 : *(it + 1);
}

int RangeMap::Predecessor(size_t range, int rank) const {
  const std::vector<int> chain = Chain(range);
  auto it = std::find(chain.begin(), chain.end(), rank);
  return it == chain.end() || it == chain.begin() ? -1 : *(it - 1);
}

RangeMap RangeMap::WithChain(size_t range, const std::vector<int>& chain) const {
  RangeMap map = *this;
  map.SetChain(range, chain);
  return map;
}

void RangeMap::SetChain(size_t range, const std::vector<int>& chain) {
  servers_.at(range) = chain.at(0);
  backups_.at(range).assign(chain.begin() + 1, chain.end());
}

RangeMap RangeMap::FromProto(const google::protobuf::RepeatedPtrField<proto::KeyRange>& ranges) {
  RangeMap map;
  for (int i = 0; i < ranges.size(); ++i) {
    const auto& range = ranges.Get(i);
    if (i == 0 && range.begin() != 0) throw MakeError("key ranges must start at 0");
    if (i > 0 && range.begin() <= map.begins_.back()) {
      throw MakeError("key range ", i, " does not begin after range ", i - 1);
    }
    if (range.server_rank() < 0) throw MakeError("key range ", i, " has no server");
    std::vector<int> chain = {range.server_rank()};
    for (int backup : range.backups()) {
      if (backup < 0 || std::find(chain.begin(), chain.end(), backup) != chain.end()) {
        throw MakeError("key range ", i, " has backup rank ", backup,
                        ", which is negative or already in its chain");
      }
      chain.push_back(backup);
    }
    map.begins_.push_back(range.begin());
    map.servers_.push_back(range.server_rank());
    map.backups_.emplace_back(chain.begin() + 1, chain.end());
  }
  if (map.begins_.empty()) throw MakeError("the view has no key ranges");
  return map;
}

void RangeMap::ToProto(google::protobuf::RepeatedPtrField<proto::KeyRange>* ranges) const {
  ranges->Clear();
  for (size_t i = 0; i < begins_.size(); ++i) {
    auto* range = ranges->Add();
    range->set_begin(begins_[i]);
    range->set_server_rank(servers_[i]);
    for (int backup : backups_[i]) range->add_backups(backup);
  }
}

Key RangeMap::last(size_t range) const {
  return range + 1 < begins_.size() ? begins_[range + 1] - 1 : std::numeric_limits<Key>::max();
}

size_t RangeMap::RangeOf(Key key) const {
  auto it = std::upper_bound(begins_.begin(), begins_.end(), key);
  return static_cast<size_t>(it - begins_.begin()) - 1;
}

std::vector<size_t> RangeMap::Split(const Key* keys, size_t count) const {
  std::vector<size_t> bounds(begins_.size() + 1);
  bounds[0] = 0;
  for (size_t r = 1; r < begins_.size(); ++r) {
    bounds[r] = static_cast<size_t>(
        std::lower_bound(keys + bounds[r - 1], keys + count, begins_[r]) - keys);
  }
  bounds[begins_.size()] = count;
  return bounds;
}

}  // namespace keel
