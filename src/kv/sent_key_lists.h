// SentKeyLists: a worker's record of the key lists it asked each server to
// keep (key caching, as in the Parameter Server paper; see Meta.key_list).
//
// A list is offered to a server the second time the worker sends it there
// (a list sent once is never worth keeping), or the first time when the
// caller knows it goes again (a training pull, whose push follows), under
// an id unique in this worker's life; once the server said it kept it
// (Kept), later requests with the same keys name the id instead of carrying
// the keys. A list is matched by a fingerprint of a sample of its keys and
// then compared whole, so a request names a list only if its keys are
// exactly the kept ones. Bounded per server (`lists` lists, `bytes` bytes of
// keys; the worker keeps a copy of each): past a bound a new list goes with
// its keys. A server that answers that it holds no such list (it dropped
// its lists at a view change, or was restarted) makes the worker forget it
// (Forget) and send the keys again; every list is forgotten at a view change
// (Clear).
//
// Thread-safe.
#ifndef KEEL_KV_SENT_KEY_LISTS_H_
#define KEEL_KV_SENT_KEY_LISTS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "kv/keys.h"
#include "kv/shared_array.h"

namespace keel {

struct KeyCacheOptions {
  bool enabled = false;
  size_t lists = 1024;              // per server
  size_t bytes = size_t{256} << 20;  // of keys, per server
  // Shorter lists always go with their keys (naming them saves little).
  size_t min_keys = 256;
  // Throws Error naming a bound that is zero.
  void Check() const;
};

class SentKeyLists {
 public:
  // How a request's keys go to its server.
  enum class Mode {
    kKeys,   // with its keys frame, no id
    kOffer,  // with its keys frame and the id, for the server to keep
    kNamed,  // the id alone
  };
  struct Choice {
    Mode mode = Mode::kKeys;
    uint64_t id = 0;
  };

  explicit SentKeyLists(KeyCacheOptions options = KeyCacheOptions()) : options_(options) {}

  // How to send `keys` to server node `server`; `sent_again`: the caller
  // will send the same keys there again (offered at once).
  Choice Choose(int server, const SharedArray<const Key>& keys, bool sent_again = false);
  // Server `server` kept list `id` (its answer to an offer).
  void Kept(int server, uint64_t id);
  // Server `server` did not keep list `id`, or no longer holds it.
  void Forget(int server, uint64_t id);
  // Forgets every list (a view change).
  void Clear();

  const KeyCacheOptions& options() const { return options_; }
  // Lists held for `server` (offered or kept).
  size_t lists(int server) const;

 private:
  struct List {
    uint64_t id = 0;
    std::vector<Key> keys;
    bool kept = false;
  };
  struct ServerLists {
    std::map<uint64_t, List> by_fingerprint;
    size_t bytes = 0;
  };
  // Fingerprints seen once per server (a bounded history).
  static constexpr size_t kSeenFingerprints = 4096;

  static uint64_t Fingerprint(const SharedArray<const Key>& keys);

  const KeyCacheOptions options_;
  mutable std::mutex mutex_;
  std::map<int, ServerLists> servers_;
  std::deque<std::pair<int, uint64_t>> seen_order_;
  std::unordered_set<uint64_t> seen_;  // hashes of (server, fingerprint)
  uint64_t next_id_ = 0;
};

}  // namespace keel

#endif  // KEEL_KV_SENT_KEY_LISTS_H_
