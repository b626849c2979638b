// KVServer's part in chain replication: passing applied pushes down a range's
// chain, following the view (ranges joined, left, or promoted to), and
// REPLICA_SYNC, which copies a range to a replica joining its chain.
#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "base/time.h"
#include "server/kv_server.h"
#include "server/shard_copy.h"

namespace keel {
namespace {

// Whether `view` says server `rank` is waiting for `range`'s copy.
bool Copying(const proto::ClusterView& view, size_t range, int rank) {
  if (range >= static_cast<size_t>(view.ranges_size())) return false;
  const auto& copying = view.ranges(static_cast<int>(range)).copying();
  return std::find(copying.begin(), copying.end(), rank) != copying.end();
}

}  // namespace

void KVServer::PassDown(const Message& push, size_t range, int origin) {
  auto ranges = node_->ranges();
  const int successor = ranges ? ranges->Successor(range, node_->rank()) : -1;
  if (successor < 0) {
    // The last replica: every one before it has applied the push.
    Message response;
    proto::Meta request = push.meta;
    request.set_sender(origin);
    Reply(request, response);
    return;
  }
  Message next;
  next.meta = push.meta;
  next.meta.set_origin(origin);
  next.frames = push.frames;
  try {
    node_->Send(node_->ServerId(successor), next);
  } catch (const Error& e) {
    // Not acknowledged: the worker resends it once the view has changed.
    LOG(WARNING) << "could not pass a push of key range " << range << " to server " << successor
                 << ": " << e.what();
  }
}

void KVServer::UpdateShards(const proto::ClusterView& view, const RangeMap& ranges,
                            bool first_view) {
  DropLeftShards(ranges);
  NotePromotions(ranges);
  AddJoinedShards(view, ranges, first_view);
}

void KVServer::DropLeftShards(const RangeMap& ranges) {
  const int rank = node_->rank();
  for (auto it = shards_.begin(); it != shards_.end();) {
    if (it->first < ranges.num_ranges() && ranges.Holds(it->first, rank)) {
      ++it;
      continue;
    }
    LOG(INFO) << "key range " << it->first << " is no longer held by server " << rank;
    it = shards_.erase(it);
  }
}

void KVServer::NotePromotions(const RangeMap& ranges) {
  const int rank = node_->rank();
  for (auto& [range, shard] : shards_) {
    const bool primary = ranges.server(range) == rank;
    if (primary && !shard.primary) {
      shard.primary_since = MonotonicSeconds();
      LOG(INFO) << "key range " << range << ": this server is its primary now";
    }
    if (primary != shard.primary) shard.tracked.clear();  // its next checkpoint is whole
    shard.primary = primary;
  }
}

void KVServer::AddJoinedShards(const proto::ClusterView& view, const RangeMap& ranges,
                               bool first_view) {
  const int rank = node_->rank();
  for (size_t range = 0; range < ranges.num_ranges(); ++range) {
    if (!ranges.Holds(range, rank) || shards_.count(range)) continue;
    Shard& shard = shards_[range];
    shard.primary = ranges.server(range) == rank;
    if (shard.primary && (!first_view || node_->replaces())) {
      shard.primary_since = MonotonicSeconds();
    }
    // At the job's start every replica starts alike (empty, or from the
    // checkpoint resumed); a server joining a chain later (the view says it
    // is copying) gets the range from its predecessor. A primary has no
    // predecessor: a replacement that is the range's only holder restores it
    // from the latest checkpoint.
    shard.ready = !Copying(view, range, rank) || ranges.server(range) == rank;
    if (!shard.ready) {
      LOG(INFO) << "key range " << range << ": joins its chain behind server "
                << ranges.Predecessor(range, rank) << "; waiting for its rows";
    }
  }
}

void KVServer::AskForRanges(const RangeMap& ranges) {
  const int rank = node_->rank();
  for (auto& [range, shard] : shards_) {
    if (shard.ready) continue;
    const int predecessor = ranges.Predecessor(range, rank);
    if (predecessor < 0) {
      // Every replica before it left: nothing to copy from.
      LOG(WARNING) << "key range " << range << ": no replica left to copy from; it starts from "
                   << "what this server has";
      ShardReady(range, shard);
      continue;
    }
    AskPredecessor(range, shard, predecessor);
  }
}

void KVServer::AskPredecessor(size_t range, Shard& shard, int predecessor) {
  int id = -1;
  try {
    id = node_->ServerId(predecessor);
  } catch (const Error&) {
    return;  // asked at the next view
  }
  if (id == shard.asked) return;
  shard.asked = id;
  shard.copy_pages = 0;  // a copy from another replica starts over
  shard.copy_rows = 0;
  Message request;
  request.meta.set_command(proto::REPLICA_SYNC);
  request.meta.set_sequence(node_->NextSequence());
  request.meta.mutable_shard()->set_range(static_cast<uint32_t>(range));
  try {
    node_->Send(id, request);
  } catch (const Error& e) {
    LOG(WARNING) << "key range " << range << ": could not ask server " << predecessor << ": "
                 << e.what();
    shard.asked = -1;
  }
}

void KVServer::OnReplicaSync(Message&& message) {
  const proto::Meta& meta = message.meta;
  const size_t range = meta.shard().range();
  if (!meta.response()) {
    AnswerShardRequest(meta, range);
    return;
  }
  auto found = shards_.find(range);
  if (found == shards_.end() || found->second.ready || meta.sender() != found->second.asked) {
    LOG(WARNING) << "ignored a copy of key range " << range << " from node " << meta.sender()
                 << ": not waiting for one from it";
    return;
  }
  Shard& shard = found->second;
  try {
    TakeShardCopy(message, shard, range);
  } catch (const std::exception& e) {  // a bad copy, or one too large for memory
    rejected_.fetch_add(1);
    shard.tables.clear();
    shard.asked = -1;  // asked again at the next view
    shard.copy_pages = 0;
    shard.copy_rows = 0;
    LOG(ERROR) << "refused a copy of key range " << range << ": " << e.what();
    return;
  }
  if (meta.shard().more_pages()) return;
  LOG(INFO) << "key range " << range << ": received " << shard.copy_rows << " rows in "
            << shard.copy_pages << " page(s) from node " << meta.sender()
            << "; this server holds a replica of it again (" << shard.held.size()
            << " push(es) held meanwhile go on now)";
  shard.copy_pages = 0;
  shard.copy_rows = 0;
  ShardReady(range, shard);
}

void KVServer::AnswerShardRequest(const proto::Meta& meta, size_t range) {
  // A replica joining the chain behind this server asks for the range. From
  // here on, pushes passed down reach it after this copy (links keep order).
  auto found = shards_.find(range);
  if (found == shards_.end()) {
    LOG(WARNING) << "node " << meta.sender() << " asked for key range " << range
                 << ", which this server does not hold";
  } else if (!found->second.ready) {
    found->second.askers.emplace_back(meta.sender(), meta.sequence());  // answered when it is
  } else {
    SendShardCopy(range, found->second, meta.sender(), meta.sequence());
  }
}

void KVServer::TakeShardCopy(const Message& message, Shard& shard, size_t range) {
  const proto::Meta& meta = message.meta;
  if (meta.shard().page() != shard.copy_pages) {
    throw MakeError("key range ", range, " from node ", meta.sender(), ": page ",
                    meta.shard().page(), " arrived where page ", shard.copy_pages, " was expected");
  }
  const ShardState state = DecodeShardCopy(message);
  if (shard.copy_pages == 0) {  // a copy replaces whatever the replica had
    shard.tables.clear();
    shard.applied.clear();
    shard.tracked.clear();
  }
  uint64_t rows = 0;
  for (const SnapshotTable& saved : state.tables) {
    ServerTable& table = TableFor(shard, range, saved.table, saved.weight_width);
    if (static_cast<uint32_t>(table.rows->row_width()) != saved.row_width) {
      throw MakeError("key range ", range, " from node ", meta.sender(), ": table ", saved.table,
                      " rows have ", saved.row_width, " floats; this server's ",
                      table.optimizer->name(), " optimizer needs ", table.rows->row_width());
    }
    rows += CopyRowsIn(saved, 0, ~Key{0}, table.rows.get());
  }
  for (const auto& [sender, sequences] : state.applied) {
    DedupeWindow& window = shard.applied[sender];
    for (uint64_t sequence : sequences) window.Insert(sequence);
  }
  // The predecessor's admission counters, so that this replica counts on
  // from where its chain stands.
  for (const auto& [id, sketch] : state.counters) {
    auto table = shard.tables.find(id);
    if (table == shard.tables.end() || table->second.admit_after <= 1) continue;
    if (sketch.width != table->second.admit_sketch_width) {
      LOG(WARNING) << "key range " << range << ": table " << id << "'s admission counters are "
                   << sketch.width << " wide, this server's " << table->second.admit_sketch_width
                   << ": they start again here";
      continue;
    }
    table->second.admission =
        std::make_unique<AdmissionSketch>(sketch.depth, sketch.width, sketch.counters);
  }
  ++shard.copy_pages;
  shard.copy_rows += rows;
}

void KVServer::SendShardCopy(size_t range, const Shard& shard, int to, uint64_t sequence) {
  const double begin = MonotonicSeconds();
  ShardState state;
  state.range = static_cast<uint32_t>(range);
  uint64_t rows = 0;
  for (const auto& [id, table] : shard.tables) {
    state.tables.push_back(SortedCopy(id, table));
    rows += state.tables.back().keys.size();
  }
  for (const auto& [id, table] : shard.tables) {
    if (!table.admission) continue;
    RangeSketch sketch;
    sketch.depth = table.admission->depth();
    sketch.width = table.admission->width();
    sketch.counters = table.admission->counters();
    state.counters.emplace_back(id, std::move(sketch));
  }
  for (const auto& [sender, window] : shard.applied) {
    state.applied.emplace_back(
        sender, std::vector<uint64_t>(window.sequences().begin(), window.sequences().end()));
  }
  std::vector<Message> pages = EncodeShardCopy(state, page_bytes_);
  try {
    for (Message& page : pages) {
      page.meta.set_sequence(sequence);
      node_->Send(to, page);
    }
    LOG(INFO) << "key range " << range << ": sent " << rows << " rows in " << pages.size()
              << " page(s) to node " << to << " (copied in " << MonotonicSeconds() - begin << " s)";
  } catch (const Error& e) {
    LOG(WARNING) << "key range " << range << ": could not send it to node " << to << ": "
                 << e.what();
  }
}

void KVServer::ShardReady(size_t range, Shard& shard) {
  shard.ready = true;
  for (const auto& [to, sequence] : std::exchange(shard.askers, {})) {
    SendShardCopy(range, shard, to, sequence);
  }
  Message report;
  report.meta.set_command(proto::REPLICA_SYNC);
  report.meta.mutable_shard()->set_range(static_cast<uint32_t>(range));
  try {
    node_->SendToScheduler(report);
  } catch (const Error& e) {
    LOG(WARNING) << "key range " << range << ": could not tell the scheduler: " << e.what();
  }
  // Pushes passed down before the copy was taken are in it already: the
  // dedupe window recognises them, and they go on down the chain.
  for (Message& held : std::exchange(shard.held, {})) Serve(std::move(held), 0);
  PublishSizes();
}

}  // namespace keel
