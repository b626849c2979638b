// ShardState: one key range's state on a server, and its wire form in a
// REPLICA_SYNC response, which brings a replica joining the range's chain up
// to date: every row (weights and optimizer state) and the push sequences
// already applied, so a push resent later is recognised there too.
#ifndef KEEL_SERVER_SHARD_COPY_H_
#define KEEL_SERVER_SHARD_COPY_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "io/checkpoint.h"
#include "kv/message.h"

namespace keel {

struct ShardState {
  uint32_t range = 0;  // index into the view's ranges
  std::vector<SnapshotTable> tables;
  // Per worker node id: the push sequences applied, oldest first.
  std::vector<std::pair<int, std::vector<uint64_t>>> applied;
  // Key admission's counters by table (RangeSketch's span unused).
  std::vector<std::pair<uint32_t, RangeSketch>> counters;
};

// The REPLICA_SYNC response carrying `state`, as pages of at most
// `page_bytes` of rows each (keys and floats; at least one row a page), in
// order: page i has shard.page i, every page but the last more_pages, and
// only the last the applied sequences and the admission counters; a table without rows is described
// in the first page. Command, response flag, shard and frames are set; the caller sets the
// sequence.
std::vector<Message> EncodeShardCopy(const ShardState& state, size_t page_bytes = kPageBytes);

// Reads one page of a REPLICA_SYNC response: its tables hold that page's
// rows. Throws Error naming the first problem (frame count or sizes that
// disagree with the meta, unsorted keys).
ShardState DecodeShardCopy(const Message& message);

}  // namespace keel

#endif  // KEEL_SERVER_SHARD_COPY_H_
