#include "cli/key_cache_flags.h"

#include "flags/flag_rules.h"

DEFINE_bool(key_cache, true,
            "worker: key caching; a push or pull whose keys for a server are a list sent there "
            "before names the list by a short id the server kept it under, instead of carrying "
            "the keys (lists of 256 keys and more, from their second request on)");
DEFINE_int32(key_cache_lists, 1024,
             "worker and server: key lists kept per worker and server (past it, a new list "
             "goes with its keys)");
DEFINE_int32(key_cache_mb, 256,
             "worker and server: MiB of key lists kept per worker and server, a key costing 8 "
             "bytes on the worker and 16 on the server (its rows' slots too); past it, a new "
             "list goes with its keys (256: an epoch of 1,000 minibatches of 10^4 keys fits on "
             "the server, 160 MiB)");
DEFINE_int32(key_cache_total_mb, 512,
             "server: MiB of key lists kept for all the workers together (16 bytes a key)");

namespace keel {

std::vector<FlagGroup> KeyCacheFlagGroups() {
  return {{"key caching", {"key_cache", "key_cache_lists", "key_cache_mb", "key_cache_total_mb"}}};
}

KeyCacheOptions KeyCacheOptionsFromFlags() {
  RequireInRange("key_cache_lists", FLAGS_key_cache_lists, 1, 1 << 20);
  RequireInRange("key_cache_mb", FLAGS_key_cache_mb, 1, 1 << 20);
  KeyCacheOptions options;
  options.enabled = FLAGS_key_cache;
  options.lists = static_cast<size_t>(FLAGS_key_cache_lists);
  options.bytes = static_cast<size_t>(FLAGS_key_cache_mb) << 20;
  return options;
}

KeyCacheBounds KeyCacheBoundsFromFlags() {
  RequireInRange("key_cache_lists", FLAGS_key_cache_lists, 1, 1 << 20);
  RequireInRange("key_cache_mb", FLAGS_key_cache_mb, 1, 1 << 20);
  RequireInRange("key_cache_total_mb", FLAGS_key_cache_total_mb, 1, 1 << 20);
  KeyCacheBounds bounds;
  bounds.lists = static_cast<size_t>(FLAGS_key_cache_lists);
  bounds.bytes = static_cast<size_t>(FLAGS_key_cache_mb) << 20;
  bounds.total_bytes = static_cast<size_t>(FLAGS_key_cache_total_mb) << 20;
  return bounds;
}

}  // namespace keel
