#include "server/chain_replication.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "base/time.h"
#include "server/replacement.h"
#include "server/shard_copy.h"

namespace keel {
namespace {

// Whether `view` says server `rank` is waiting for `range`'s copy.
bool Copying(const proto::ClusterView& view, size_t range, int rank) {
  if (range >= static_cast<size_t>(view.ranges_size())) return false;
  const auto& copying = view.ranges(static_cast<int>(range)).copying();
  return std::find(copying.begin(), copying.end(), rank) != copying.end();
}

// Whether `view` says server `rank` copies `range` before joining its chain.
bool Precopying(const proto::ClusterView& view, size_t range, int rank) {
  if (range >= static_cast<size_t>(view.ranges_size())) return false;
  const auto& precopy = view.ranges(static_cast<int>(range)).precopy();
  return std::find(precopy.begin(), precopy.end(), rank) != precopy.end();
}

// Whether any table of `shard` evicts rows: its removals are not tracked
// between a pre-copy and its delta, so such a range is handed over whole.
bool Evicts(const Shard& shard) {
  return std::any_of(shard.tables.begin(), shard.tables.end(),
                     [](const auto& table) { return table.second.evict_after > 0; });
}

}  // namespace

ChainReplication::ChainReplication(ServerState* state, Hooks hooks)
    : state_(*state), node_(state->node), hooks_(std::move(hooks)) {}

void ChainReplication::PassDown(const Message& push, size_t range, int origin) {
  auto ranges = node_->ranges();
  const int successor = ranges ? ranges->Successor(range, node_->rank()) : -1;
  if (successor < 0) {
    // The last replica: every one before it has applied the push.
    Message response;
    proto::Meta request = push.meta;
    request.set_sender(origin);
    state_.Reply(request, response);
    return;
  }
  Message next;
  next.meta = push.meta;
  next.meta.set_origin(origin);
  next.frames = push.frames;
  try {
    node_->Send(node_->ServerId(successor), next);
  } catch (const std::exception& e) {  // Error, or the socket's own (memory ran out)
    // Not acknowledged: the worker resends it once the view has changed.
    LOG(WARNING) << "could not pass a push of key range " << range << " to server " << successor
                 << ": " << e.what();
  }
}

void ChainReplication::UpdateShards(const proto::ClusterView& view, const RangeMap& ranges,
                                    bool first_view) {
  DropLeftShards(view, ranges);
  NotePromotions(ranges);
  AddJoinedShards(view, ranges, first_view);
}

void ChainReplication::DropLeftShards(const proto::ClusterView& view, const RangeMap& ranges) {
  const int rank = node_->rank();
  for (auto it = state_.shards.begin(); it != state_.shards.end();) {
    if (it->first < ranges.num_ranges() &&
        (ranges.Holds(it->first, rank) ||
         (it->second.precopy && Precopying(view, it->first, rank)))) {
      ++it;
      continue;
    }
    LOG(INFO) << "key range " << it->first << " is no longer held by server " << rank;
    it = state_.shards.erase(it);
  }
}

void ChainReplication::NotePromotions(const RangeMap& ranges) {
  const int rank = node_->rank();
  for (auto& [range, shard] : state_.shards) {
    const bool primary = ranges.server(range) == rank;
    if (primary && !shard.primary) {
      shard.primary_since = MonotonicSeconds();
      LOG(INFO) << "key range " << range << ": this server is its primary now";
    }
    if (primary != shard.primary) shard.tracked.clear();  // its next checkpoint is whole
    shard.primary = primary;
  }
}

void ChainReplication::AddJoinedShards(const proto::ClusterView& view, const RangeMap& ranges,
                                       bool first_view) {
  const int rank = node_->rank();
  for (size_t range = 0; range < ranges.num_ranges(); ++range) {
    auto existing = state_.shards.find(range);
    if (existing == state_.shards.end() && !ranges.Holds(range, rank) &&
        Precopying(view, range, rank)) {
      // A range moving here: copied before this server joins its chain.
      Shard& shard = state_.shards[range];
      shard.precopy = true;
      shard.ready = false;
      LOG(INFO) << "key range " << range << " moves to this server: copying it from server "
                << ranges.Chain(range).back() << " while its pushes go on";
      continue;
    }
    if (existing != state_.shards.end() && existing->second.precopy && ranges.Holds(range, rank)) {
      // It joins the chain now: the pushes passed down wait for the changes
      // since the pre-copy (or for a whole copy, if it has none).
      existing->second.precopy = false;
      existing->second.asked = -1;
      LOG(INFO) << "key range " << range << ": joins its chain behind server "
                << ranges.Predecessor(range, rank) << "; waiting for the changes since its copy";
      continue;
    }
    if (!ranges.Holds(range, rank) || existing != state_.shards.end()) continue;
    Shard& shard = state_.shards[range];
    shard.primary = ranges.server(range) == rank;
    if (shard.primary && (!first_view || Replacement(*node_).replaces())) {
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

void ChainReplication::AskForRanges(const RangeMap& ranges) {
  const int rank = node_->rank();
  for (auto& [range, shard] : state_.shards) {
    if (shard.ready) continue;
    if (shard.precopy) {
      // From the chain's end: the replica this one will follow.
      if (!shard.precopied) AskPredecessor(range, shard, ranges.Chain(range).back());
      continue;
    }
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

void ChainReplication::AskPredecessor(size_t range, Shard& shard, int predecessor) {
  int id = -1;
  try {
    id = node_->ServerId(predecessor);
  } catch (const Error&) {
    return;  // asked at the next view
  }
  AskNode(range, shard, id);
}

void ChainReplication::AskNode(size_t range, Shard& shard, int id) {
  if (id == shard.asked) return;
  shard.asked = id;
  shard.asked_sequence = node_->NextSequence();
  shard.copy_pages = 0;  // a copy from another replica starts over
  shard.copy_rows = 0;
  Message request;
  request.meta.set_command(proto::REPLICA_SYNC);
  request.meta.set_sequence(shard.asked_sequence);
  request.meta.mutable_shard()->set_range(static_cast<uint32_t>(range));
  request.meta.mutable_shard()->set_precopy(shard.precopy);
  // Rows copied from that node already: only what changed since.
  const bool delta = shard.copied_from == id;
  request.meta.mutable_shard()->set_delta(delta);
  shard.slicing = shard.precopy && !delta;
  if (shard.slicing) {
    // A pre-copy's whole round, in slices: the source serves pushes between.
    if (shard.asked_slice_source != id) {
      shard.precopy_slice = 0;
      shard.precopy_round_rows = 0;
    }
    shard.asked_slice_source = id;
    request.meta.mutable_shard()->set_slice(shard.precopy_slice);
    request.meta.mutable_shard()->set_slices(kPrecopySlices);
  }
  try {
    node_->Send(id, request);
  } catch (const std::exception& e) {
    LOG(WARNING) << "key range " << range << ": could not ask node " << id << ": " << e.what();
    shard.asked = -1;  // asked again at the next view
  }
}

void ChainReplication::OnReplicaSync(Message&& message) {
  const proto::Meta& meta = message.meta;
  const size_t range = meta.shard().range();
  if (!meta.response()) {
    AnswerShardRequest(meta, range);
    return;
  }
  auto found = state_.shards.find(range);
  // The answer to the request out (an earlier one's, still on its way, is not).
  if (found == state_.shards.end() || found->second.ready || meta.sender() != found->second.asked ||
      meta.sequence() != found->second.asked_sequence) {
    LOG(WARNING) << "ignored a copy of key range " << range << " from node " << meta.sender()
                 << ": not waiting for one from it";
    return;
  }
  Shard& shard = found->second;
  try {
    TakeShardCopy(message, shard, range);
  } catch (const std::exception& e) {  // a bad copy, or one too large for memory
    state_.counters.rejected.fetch_add(1);
    shard.tables.clear();
    shard.precopied = false;  // its rows are gone: the next copy is whole
    shard.copied_from = -1;
    shard.precopy_rounds = 0;
    shard.precopy_slice = 0;
    shard.precopy_round_rows = 0;
    shard.asked_slice_source = -1;
    shard.asked = -1;  // asked again at the next view
    shard.copy_pages = 0;
    shard.copy_rows = 0;
    LOG(ERROR) << "refused a copy of key range " << range << ": " << e.what();
    return;
  }
  if (meta.shard().more_pages()) return;
  if (shard.precopy) {
    shard.precopy_round_rows += shard.copy_rows;
    // A whole answer (slices not echoed: the source sent every row) ends them.
    if (shard.slicing && meta.shard().slices() > 0 && ++shard.precopy_slice < kPrecopySlices) {
      // A slice of the whole round: the next, until the last.
      shard.asked = -1;
      AskNode(range, shard, meta.sender());
      return;
    }
    shard.slicing = false;
    PrecopyRound(range, shard, meta.sender());
    return;
  }
  LOG(INFO) << "key range " << range << ": received " << shard.copy_rows << " rows in "
            << shard.copy_pages << " page(s) from node " << meta.sender()
            << "; this server holds a replica of it again (" << shard.held.size()
            << " push(es) held meanwhile go on now)";
  shard.copy_pages = 0;
  shard.copy_rows = 0;
  state_.range_pushes.Set(range, meta.shard().pushes());
  ShardReady(range, shard);
}

void ChainReplication::AnswerShardRequest(const proto::Meta& meta, size_t range) {
  // A replica joining the chain behind this server asks for the range. From
  // here on, pushes passed down reach it after this copy (links keep order).
  auto found = state_.shards.find(range);
  if (found == state_.shards.end()) {
    LOG(WARNING) << "node " << meta.sender() << " asked for key range " << range
                 << ", which this server does not hold";
  } else if (!found->second.ready) {
    // Answered (whole) when it is.
    found->second.askers.emplace_back(meta.sender(), meta.sequence());
  } else if (meta.shard().precopy() || meta.shard().delta()) {
    AnswerPrecopy(meta, range, found->second);
  } else {
    SendShardCopy(range, found->second, meta.sender(), meta.sequence());
  }
}

void ChainReplication::AnswerPrecopy(const proto::Meta& meta, size_t range, Shard& shard) {
  const int to = meta.sender();
  auto record = shard.precopies.find(to);
  // Only the rows changed since the asker's last copy from here, if this
  // replica took it (its stamps tell); removals (eviction) stamps do not
  // show, so such a range goes whole.
  std::map<uint32_t, uint32_t> since;
  const bool delta = meta.shard().delta() && record != shard.precopies.end() && !Evicts(shard);
  if (delta) since = record->second;
  if (!delta && meta.shard().precopy() && meta.shard().slices() > 1 &&
      meta.shard().slices() <= kPrecopySlices && meta.shard().slice() < meta.shard().slices() &&
      !Evicts(shard)) {
    SendPrecopySlice(meta, range, shard);
    return;
  }
  SendShardCopy(range, shard, to, meta.sequence(), delta ? &since : nullptr);
  if (!meta.shard().precopy()) {
    shard.precopies.erase(to);  // handed over
    return;
  }
  RecordPrecopy(to, &shard);
}

void ChainReplication::SendPrecopySlice(const proto::Meta& meta, size_t range, Shard& shard) {
  // The slices are slot ranges of each table (cheap to read, unlike key
  // ranges: a slot-ordered table is roughly key-ordered anyway). The stamps
  // are taken at the first, so rows changed while the slices go come in the
  // next round. A table rebuilt since (grown, or laid out anew: its rows
  // moved) or made since ends the slices: this answer is every row, and
  // says so (no slices echoed).
  const int to = meta.sender();
  const uint32_t slices = meta.shard().slices();
  const uint32_t slice = meta.shard().slice();
  if (slice == 0) {
    RecordPrecopy(to, &shard);
    std::map<uint32_t, uint64_t>& generations = shard.precopy_generations[to];
    generations.clear();
    for (const auto& [id, table] : shard.tables) generations[id] = table.rows->generation();
  }
  const std::map<uint32_t, uint64_t>& generations = shard.precopy_generations[to];
  const bool moved = std::any_of(shard.tables.begin(), shard.tables.end(), [&](const auto& table) {
    const auto found = generations.find(table.first);
    return found == generations.end() || found->second != table.second.rows->generation();
  });
  if (moved) {
    SendShardCopy(range, shard, to, meta.sequence(), nullptr, nullptr, /*adds=*/slice > 0);
    return;
  }
  const TableCopier take = [&](uint32_t id, const ServerTable& table) {
    const size_t capacity = table.rows->capacity();
    const size_t begin = capacity * slice / slices;
    const size_t end = slice + 1 == slices ? ~size_t{0} : capacity * (slice + 1) / slices;
    return SortedCopy(id, table, 0, begin, end);
  };
  SendShardCopy(range, shard, to, meta.sequence(), nullptr, &take, /*adds=*/slice > 0, slices);
}

void ChainReplication::RecordPrecopy(int to, Shard* shard) {
  // The stamps now: rows changed after this copy carry later ones.
  std::map<uint32_t, uint32_t>& stamps = shard->precopies[to];
  stamps.clear();
  for (auto& [id, table] : shard->tables) {
    table.rows->EnableStamps();
    stamps[id] = table.rows->stamp();
    table.rows->AdvanceStamp();
  }
}

void ChainReplication::PrecopyRound(size_t range, Shard& shard, int from) {
  // Each round copies what changed during the one before; once that stops
  // halving (pushes change rows as fast as they are copied), or is small,
  // the hand-over follows: joined to the chain, the pushes passed down wait
  // only for what changed during the last round.
  constexpr int kMaxRounds = 4;
  constexpr uint64_t kSmallRows = 1000;
  const uint64_t rows = std::exchange(shard.precopy_round_rows, 0);
  shard.precopy_slice = 0;
  shard.asked_slice_source = -1;
  const bool shrinking = shard.precopy_rounds == 0 || rows * 2 <= shard.precopy_last_rows;
  ++shard.precopy_rounds;
  shard.precopy_last_rows = rows;
  shard.copied_from = from;
  if (shard.precopy_rounds < kMaxRounds && rows > kSmallRows && shrinking) {
    shard.asked = -1;
    AskNode(range, shard, from);
    return;
  }
  PrecopyDone(range, shard, from);
}

void ChainReplication::PrecopyDone(size_t range, Shard& shard, int from) {
  LOG(INFO) << "key range " << range << ": copied from node " << from << " in "
            << shard.precopy_rounds << " round(s) (" << shard.precopy_last_rows
            << " rows in the last) ahead of joining its chain";
  shard.precopied = true;
  shard.copy_pages = 0;
  shard.copy_rows = 0;
  Message report;
  report.meta.set_command(proto::REPLICA_SYNC);
  report.meta.mutable_shard()->set_range(static_cast<uint32_t>(range));
  report.meta.mutable_shard()->set_precopy(true);
  try {
    node_->SendToScheduler(report);
  } catch (const std::exception& e) {
    LOG(WARNING) << "key range " << range << ": could not tell the scheduler: " << e.what();
  }
  hooks_.readiness_changed();
}

void ChainReplication::TakeShardCopy(const Message& message, Shard& shard, size_t range) {
  const proto::Meta& meta = message.meta;
  if (meta.shard().page() != shard.copy_pages) {
    throw MakeError("key range ", range, " from node ", meta.sender(), ": page ",
                    meta.shard().page(), " arrived where page ", shard.copy_pages, " was expected");
  }
  const ShardState state = DecodeShardCopy(message);
  if (shard.copy_pages == 0) {
    // A copy replaces whatever the replica had; a delta goes over its
    // pre-copy (only the dedupe windows are replaced whole).
    if (!meta.shard().delta()) shard.tables.clear();
    shard.applied.clear();
    shard.tracked.clear();
    shard.precopies.clear();  // stamps of rows this copy replaces
  }
  uint64_t rows = 0;
  for (const SnapshotTable& saved : state.tables) {
    ServerTable& table = state_.TableFor(shard, range, saved.table, saved.weight_width);
    if (static_cast<uint32_t>(table.rows->row_width()) != saved.row_width) {
      throw MakeError("key range ", range, " from node ", meta.sender(), ": table ", saved.table,
                      " rows have ", saved.row_width, " floats; this server's ",
                      table.optimizer->name(), " optimizer needs ", table.rows->row_width());
    }
    if (shard.slicing && shard.precopy_slice == 0 && shard.copy_pages == 0) {
      // The first of a round's slices: room for them all now, so that the
      // table is laid out for the whole range rather than grown around the
      // first slice's keys.
      table.rows->Reserve(saved.keys.size() * kPrecopySlices);
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

void ChainReplication::SendShardCopy(size_t range, const Shard& shard, int to, uint64_t sequence,
                                     const std::map<uint32_t, uint32_t>* since,
                                     const TableCopier* take, bool adds, uint32_t slices) {
  // Copying a large range can run out of memory, and sending can fail: that
  // is reported, no copy goes from here, and this server goes on as it was.
  try {
    const double begin = MonotonicSeconds();
    ShardState state;
    state.range = static_cast<uint32_t>(range);
    uint64_t rows = 0;
    for (const auto& [id, table] : shard.tables) {
      uint32_t stamp = 0;  // whole
      if (since) {
        auto found = since->find(id);
        if (found != since->end()) stamp = found->second;
      }
      state.tables.push_back(take ? (*take)(id, table) : SortedCopy(id, table, stamp));
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
    std::vector<Message> pages = EncodeShardCopy(state, state_.page_bytes);
    if (!pages.empty()) {
      pages.back().meta.mutable_shard()->set_pushes(state_.range_pushes.Get(range));
    }
    for (Message& page : pages) {
      page.meta.set_sequence(sequence);
      page.meta.mutable_shard()->set_delta(since != nullptr || adds);
      page.meta.mutable_shard()->set_slices(slices);
      node_->Send(to, page);
    }
    LOG(INFO) << "key range " << range << ": sent " << rows << (since ? " changed" : "")
              << " rows in " << pages.size() << " page(s) to node " << to << " (copied in "
              << MonotonicSeconds() - begin << " s)";
  } catch (const std::exception& e) {
    LOG(WARNING) << "key range " << range << ": could not copy it to node " << to << ": "
                 << e.what();
  }
}

void ChainReplication::ShardReady(size_t range, Shard& shard) {
  shard.ready = true;
  shard.precopied = false;  // handed over
  shard.copied_from = -1;
  shard.precopy_rounds = 0;
  for (const auto& [to, sequence] : std::exchange(shard.askers, {})) {
    SendShardCopy(range, shard, to, sequence);
  }
  Message report;
  report.meta.set_command(proto::REPLICA_SYNC);
  report.meta.mutable_shard()->set_range(static_cast<uint32_t>(range));
  try {
    node_->SendToScheduler(report);
  } catch (const std::exception& e) {
    LOG(WARNING) << "key range " << range << ": could not tell the scheduler: " << e.what();
  }
  // Pushes passed down before the copy was taken are in it already: the
  // dedupe window recognises them, and they go on down the chain. One that
  // fails (an exception serving it) is not acknowledged, so its worker sends
  // it again; the others are still served.
  for (Message& held : std::exchange(shard.held, {})) {
    const int sender = held.meta.sender();
    const uint64_t sequence = held.meta.sequence();
    try {
      hooks_.serve_held(std::move(held));
    } catch (const std::exception& e) {
      state_.counters.rejected.fetch_add(1);
      LOG(ERROR) << "key range " << range << ": a push held for its copy (sequence " << sequence
                 << " from node " << sender << ") failed: " << e.what();
    }
  }
  hooks_.readiness_changed();
}

}  // namespace keel
