// The command line's key-caching flags (key_cache_flags.cc): whether a worker
// names the key lists it sent before (kv/sent_key_lists.h), and the bounds of
// the lists kept on both sides (server/key_list_cache.h).
#ifndef KEEL_CLI_KEY_CACHE_FLAGS_H_
#define KEEL_CLI_KEY_CACHE_FLAGS_H_

#include <gflags/gflags.h>

#include <vector>

#include "flags/flag_group.h"
#include "kv/sent_key_lists.h"
#include "server/key_list_cache.h"

DECLARE_bool(key_cache);

namespace keel {

// The heading of `keel COMMAND --help` for this file's flags.
std::vector<FlagGroup> KeyCacheFlagGroups();

// A worker's: --key_cache, --key_cache_lists, --key_cache_mb. Throws Error
// naming the flag, its value and the rule.
KeyCacheOptions KeyCacheOptionsFromFlags();
// A server's: --key_cache_lists, --key_cache_mb, --key_cache_total_mb.
KeyCacheBounds KeyCacheBoundsFromFlags();

}  // namespace keel

#endif  // KEEL_CLI_KEY_CACHE_FLAGS_H_
