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
};

// A REPLICA_SYNC response carrying `state` (command, response flag, shard and
// frames set; the caller sets the sequence).
Message EncodeShardCopy(const ShardState& state);

// Reads a REPLICA_SYNC response. Throws Error naming the first problem (frame
// count or sizes that disagree with the meta, unsorted keys).
ShardState DecodeShardCopy(const Message& message);

}  // namespace keel

#endif  // KEEL_SERVER_SHARD_COPY_H_
