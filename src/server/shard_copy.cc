#include "server/shard_copy.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "base/error.h"

namespace keel {
namespace {

// Throws Error unless `message` has the frames its tables and senders need.
void CheckShape(const Message& message, const std::string& what) {
  const proto::ShardCopy& shard = message.meta.shard();
  const size_t frames =
      2 * static_cast<size_t>(shard.tables_size()) + 1 + static_cast<size_t>(shard.counters_size());
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

namespace {

// Adds rows [begin, begin + count) of `table` to `message` as one table.
void AddTableSlice(const SnapshotTable& table, size_t begin, size_t count, Message* message) {
  proto::ShardTable* described = message->meta.mutable_shard()->add_tables();
  described->set_table(table.table);
  described->set_weight_width(table.weight_width);
  described->set_row_width(table.row_width);
  described->set_rows(count);
  const auto keys = table.keys.begin() + static_cast<std::ptrdiff_t>(begin);
  const auto rows = table.rows.begin() + static_cast<std::ptrdiff_t>(begin * table.row_width);
  message->frames.push_back(AsBytes(
      SharedArray<const Key>(std::vector<Key>(keys, keys + static_cast<std::ptrdiff_t>(count)))));
  message->frames.push_back(AsBytes(SharedArray<const float>(
      std::vector<float>(rows, rows + static_cast<std::ptrdiff_t>(count * table.row_width)))));
}

Message NewPage(uint32_t range, uint32_t page) {
  Message message;
  message.meta.set_command(proto::REPLICA_SYNC);
  message.meta.set_response(true);
  message.meta.mutable_shard()->set_range(range);
  message.meta.mutable_shard()->set_page(page);
  return message;
}

// Ends `page` with the sequences (the last page) or an empty frame.
void ClosePage(const ShardState& state, bool last, Message* page) {
  proto::ShardCopy* shard = page->meta.mutable_shard();
  std::vector<uint64_t> sequences;
  if (last) {
    for (const auto& [sender, applied] : state.applied) {
      shard->add_senders(sender);
      shard->add_sequence_counts(static_cast<uint32_t>(applied.size()));
      sequences.insert(sequences.end(), applied.begin(), applied.end());
    }
  }
  shard->set_more_pages(!last);
  page->frames.push_back(AsBytes(SharedArray<const uint64_t>(std::move(sequences))));
  if (!last) return;
  for (const auto& [table, sketch] : state.counters) {
    proto::ShardCounters* described = shard->add_counters();
    described->set_table(table);
    described->set_depth(sketch.depth);
    described->set_width(sketch.width);
    page->frames.push_back(AsBytes(SharedArray<const uint16_t>(sketch.counters)));
  }
}

}  // namespace

std::vector<Message> EncodeShardCopy(const ShardState& state, size_t page_bytes) {
  std::vector<Message> pages;
  Message page = NewPage(state.range, 0);
  size_t room = page_bytes;  // bytes of rows the page still takes
  bool page_has_rows = false;
  for (const SnapshotTable& table : state.tables) {
    const uint64_t row_bytes = sizeof(Key) + uint64_t{table.row_width} * sizeof(float);
    if (table.keys.empty()) {
      if (pages.empty()) AddTableSlice(table, 0, 0, &page);
      continue;
    }
    for (size_t begin = 0; begin < table.keys.size();) {
      size_t count = std::min<uint64_t>(table.keys.size() - begin, room / row_bytes);
      if (count == 0 && !page_has_rows) count = 1;  // a row larger than a page goes alone
      if (count == 0) {
        ClosePage(state, false, &page);
        pages.push_back(std::move(page));
        page = NewPage(state.range, static_cast<uint32_t>(pages.size()));
        room = page_bytes;
        page_has_rows = false;
        continue;
      }
      AddTableSlice(table, begin, count, &page);
      begin += count;
      room -= std::min<uint64_t>(room, count * row_bytes);
      page_has_rows = true;
    }
  }
  ClosePage(state, true, &page);
  pages.push_back(std::move(page));
  return pages;
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
  const size_t sequences = 2 * static_cast<size_t>(shard.tables_size());
  state.applied = DecodeApplied(shard, message.frames[sequences], what);
  for (int c = 0; c < shard.counters_size(); ++c) {
    const proto::ShardCounters& described = shard.counters(c);
    const auto counters = message.frames[sequences + 1 + c].As<const uint16_t>();
    if (counters.size() != uint64_t{described.depth()} * described.width()) {
      throw MakeError(what, ": table ", described.table(), "'s admission counters are said to be ",
                      described.depth(), " x ", described.width(), " but ", counters.size(),
                      " came");
    }
    RangeSketch sketch;
    sketch.depth = described.depth();
    sketch.width = described.width();
    sketch.counters.assign(counters.begin(), counters.end());
    state.counters.emplace_back(described.table(), std::move(sketch));
  }
  return state;
}

}  // namespace keel
