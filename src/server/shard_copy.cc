#include "server/shard_copy.h"

#include <cstring>

#include "base/error.h"

namespace keel {
namespace {

// Throws Error unless `message` has the frames its tables and senders need.
void CheckShape(const Message& message, const std::string& what) {
  const proto::ShardCopy& shard = message.meta.shard();
  const size_t frames = 2 * static_cast<size_t>(shard.tables_size()) + 1;
  if (message.frames.size() != frames) {
    throw MakeError(what, ": ", message.frames.size(), " frames for ", shard.tables_size(),
                    " table(s); expected ", frames);
  }
  if (shard.senders_size() != shard.sequence_counts_size()) {
    throw MakeError(what, ": ", shard.senders_size(), " senders but ", shard.sequence_counts_size(),
                    " sequence counts");
  }
}

// The table `described` says its frames `key_frame` and `row_frame` hold.
SnapshotTable DecodeTable(const proto::ShardTable& described, const Bytes& key_frame,
                          const Bytes& row_frame, const std::string& what) {
  if (described.weight_width() == 0 || described.weight_width() > kMaxValueWidth ||
      described.row_width() < described.weight_width() ||
      described.row_width() > 4 * uint64_t{kMaxValueWidth}) {
    throw MakeError(what, ": table ", described.table(), " has weight width ",
                    described.weight_width(), " and row width ", described.row_width());
  }
  auto keys = key_frame.As<const Key>();
  auto rows = row_frame.As<const float>();
  if (keys.size() != described.rows() ||
      rows.size() != described.rows() * static_cast<uint64_t>(described.row_width())) {
    throw MakeError(what, ": table ", described.table(), " says ", described.rows(), " rows of ",
                    described.row_width(), " floats but carries ", keys.size(), " keys and ",
                    rows.size(), " floats");
  }
  for (size_t i = 1; i < keys.size(); ++i) {
    if (keys[i] <= keys[i - 1]) {
      throw MakeError(what, ": table ", described.table(), " keys are not sorted at row ", i);
    }
  }
  SnapshotTable table;
  table.table = described.table();
  table.weight_width = described.weight_width();
  table.row_width = described.row_width();
  table.keys.assign(keys.begin(), keys.end());
  table.rows.assign(rows.begin(), rows.end());
  return table;
}

// The applied sequences per sender that `shard` announces and `frame` holds.
std::vector<std::pair<int, std::vector<uint64_t>>> DecodeApplied(const proto::ShardCopy& shard,
                                                                 const Bytes& frame,
                                                                 const std::string& what) {
  auto sequences = frame.As<const uint64_t>();
  uint64_t total = 0;
  for (uint32_t count : shard.sequence_counts()) total += count;
  if (sequences.size() != total) {
    throw MakeError(what, ": ", total, " applied sequences announced, ", sequences.size(),
                    " carried");
  }
  std::vector<std::pair<int, std::vector<uint64_t>>> applied;
  size_t next = 0;
  for (int s = 0; s < shard.senders_size(); ++s) {
    const uint32_t count = shard.sequence_counts(s);
    applied.emplace_back(shard.senders(s), std::vector<uint64_t>(sequences.begin() + next,
                                                                 sequences.begin() + next + count));
    next += count;
  }
  return applied;
}

}  // namespace

Message EncodeShardCopy(const ShardState& state) {
  Message message;
  message.meta.set_command(proto::REPLICA_SYNC);
  message.meta.set_response(true);
  proto::ShardCopy* shard = message.meta.mutable_shard();
  shard->set_range(state.range);
  for (const SnapshotTable& table : state.tables) {
    proto::ShardTable* described = shard->add_tables();
    described->set_table(table.table);
    described->set_weight_width(table.weight_width);
    described->set_row_width(table.row_width);
    described->set_rows(table.keys.size());
    message.frames.push_back(AsBytes(SharedArray<const Key>(table.keys)));
    message.frames.push_back(AsBytes(SharedArray<const float>(table.rows)));
  }
  std::vector<uint64_t> sequences;
  for (const auto& [sender, applied] : state.applied) {
    shard->add_senders(sender);
    shard->add_sequence_counts(static_cast<uint32_t>(applied.size()));
    sequences.insert(sequences.end(), applied.begin(), applied.end());
  }
  message.frames.push_back(AsBytes(SharedArray<const uint64_t>(std::move(sequences))));
  return message;
}

ShardState DecodeShardCopy(const Message& message) {
  const proto::ShardCopy& shard = message.meta.shard();
  const std::string what = "key range " + std::to_string(shard.range()) + " from node " +
                           std::to_string(message.meta.sender());
  CheckShape(message, what);
  ShardState state;
  state.range = shard.range();
  for (int t = 0; t < shard.tables_size(); ++t) {
    state.tables.push_back(
        DecodeTable(shard.tables(t), message.frames[2 * t], message.frames[2 * t + 1], what));
  }
  state.applied = DecodeApplied(shard, message.frames.back(), what);
  return state;
}

}  // namespace keel
