#include "kv/sent_key_lists.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace keel {
namespace {

constexpr size_t kFingerprintSamples = 256;

uint64_t Mix(uint64_t hash, uint64_t value) {
  hash ^= value + 0x9E3779B97F4A7C15ULL + (hash << 6) + (hash >> 2);
  return hash * 0xBF58476D1CE4E5B9ULL;
}

uint64_t SeenKey(int server, uint64_t fingerprint) {
  return Mix(fingerprint, static_cast<uint64_t>(static_cast<uint32_t>(server)));
}

}  // namespace

void KeyCacheOptions::Check() const {
  if (lists == 0) throw MakeError("key cache: the lists kept per server must be at least 1");
  if (bytes == 0) throw MakeError("key cache: the bytes kept per server must be at least 1");
}

uint64_t SentKeyLists::Fingerprint(const SharedArray<const Key>& keys) {
  const size_t count = keys.size();
  uint64_t hash = Mix(0, count);
  if (count == 0) return hash;
  const size_t step = std::max<size_t>(1, count / kFingerprintSamples);
  for (size_t i = 0; i < count; i += step) hash = Mix(hash, keys[i]);
  return Mix(hash, keys[count - 1]);
}

SentKeyLists::Choice SentKeyLists::Choose(int server, const SharedArray<const Key>& keys,
                                          bool sent_again) {
  if (!options_.enabled || keys.size() < std::max<size_t>(1, options_.min_keys)) return {};
  const uint64_t fingerprint = Fingerprint(keys);
  const size_t bytes = keys.size() * sizeof(Key);
  std::unique_lock<std::mutex> lock(mutex_);
  ServerLists& lists = servers_[server];
  auto found = lists.by_fingerprint.find(fingerprint);
  if (found != lists.by_fingerprint.end()) {
    const List& list = found->second;
    const uint64_t id = list.id;
    const bool kept = list.kept;
    // The copy is not erased while the worker lives but at Forget or Clear;
    // compared under the lock, it cannot go meanwhile.
    if (list.keys.size() != keys.size() || std::memcmp(list.keys.data(), keys.data(), bytes) != 0) {
      return {};  // another list with the same fingerprint: sent with its keys
    }
    // An offer not answered yet is offered again (requests in flight together).
    return {kept ? Mode::kNamed : Mode::kOffer, id};
  }
  const uint64_t seen = SeenKey(server, fingerprint);
  if (!sent_again && !seen_.count(seen)) {
    seen_.insert(seen);
    seen_order_.emplace_back(server, fingerprint);
    if (seen_order_.size() > kSeenFingerprints) {
      seen_.erase(SeenKey(seen_order_.front().first, seen_order_.front().second));
      seen_order_.pop_front();
    }
    return {};
  }
  if (lists.by_fingerprint.size() + 1 > options_.lists || lists.bytes + bytes > options_.bytes) {
    return {};
  }
  List list;
  list.id = ++next_id_;
  list.keys.assign(keys.begin(), keys.end());
  lists.bytes += bytes;
  const uint64_t id = list.id;
  lists.by_fingerprint.emplace(fingerprint, std::move(list));
  return {Mode::kOffer, id};
}

void SentKeyLists::Kept(int server, uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto lists = servers_.find(server);
  if (lists == servers_.end()) return;
  for (auto& [fingerprint, list] : lists->second.by_fingerprint) {
    if (list.id == id) list.kept = true;
  }
}

void SentKeyLists::Forget(int server, uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto lists = servers_.find(server);
  if (lists == servers_.end()) return;
  auto& by_fingerprint = lists->second.by_fingerprint;
  for (auto it = by_fingerprint.begin(); it != by_fingerprint.end(); ++it) {
    if (it->second.id != id) continue;
    lists->second.bytes -= it->second.keys.size() * sizeof(Key);
    by_fingerprint.erase(it);
    return;
  }
}

void SentKeyLists::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  servers_.clear();
}

size_t SentKeyLists::lists(int server) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = servers_.find(server);
  return found == servers_.end() ? 0 : found->second.by_fingerprint.size();
}

}  // namespace keel
