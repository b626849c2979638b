#include "server/kv_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "base/error.h"
#include "base/time.h"
#include "io/checkpoint.h"
#include "kv/kv_worker.h"
#include "server/shard_copy.h"

namespace keel {

static_assert(2 * kResendSequenceHorizon <= DedupeWindow::kDefaultCapacity,
              "a resent request must still be in the server's dedupe window");

namespace {
// Pushes a replica waiting for its range's copy keeps for after it.
constexpr size_t kMaxHeldPushes = 100000;
}  // namespace

KVServer::KVServer(Node* node, const OptimizerOptions& default_optimizer,
                   std::map<uint32_t, TableSpec> tables, int64_t staleness)
    : node_(node),
      default_optimizer_(default_optimizer),
      specs_(std::move(tables)),
      gate_(staleness) {
  node_->SetViewHandler([this](const proto::ClusterView& view) { OnView(view); });
  // Check every optimizer now, not at the first request.
  MakeOptimizer(default_optimizer_);
  for (const auto& [id, spec] : specs_) MakeOptimizer(spec.optimizer);
  node_->SetDataHandler([this](Message&& message) { Handle(std::move(message)); });
  node_->SetControlHandler([this](Message&& message) {
    if (message.meta.command() == proto::SNAPSHOT) {
      OnSnapshot(message.meta);
    } else {
      LOG(WARNING) << "ignored unexpected " << Describe(message.meta);
    }
  });
  writer_ = std::make_unique<SnapshotWriter>([this](const std::string& checkpoint,
                                                    const proto::CheckpointFile& file,
                                                    const std::string& error) {
    Message report;
    report.meta.set_command(proto::SNAPSHOT);
    report.meta.set_checkpoint(checkpoint);
    *report.meta.mutable_file() = file;
    report.meta.set_error(error);
    try {
      node_->SendToScheduler(report);
    } catch (const std::exception& e) {
      LOG(WARNING) << "checkpoint " << checkpoint << ": could not report: " << e.what();
    }
  });
}

KVServer::~KVServer() {
  writer_.reset();  // snapshots already copied are written and reported first
  node_->Stop();
}

std::string KVServer::failure() const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return failure_;
}

void KVServer::OnSnapshot(const proto::Meta& meta) {
  const double begin = MonotonicSeconds();
  ServerSnapshot snapshot;
  snapshot.server_rank = node_->rank();
  // Each range is written once, by its primary.
  auto ranges = node_->ranges();
  std::map<uint32_t, SnapshotTable> copies;
  uint64_t rows = 0;
  for (const auto& [range, shard] : shards_) {
    if (!ranges || ranges->server(range) != node_->rank()) continue;
    snapshot.spans.emplace_back(ranges->begin(range), ranges->last(range));
    for (const auto& [id, table] : shard.tables) {
      SnapshotTable& copy = copies[id];
      copy.table = id;
      copy.weight_width = static_cast<uint32_t>(table.rows->weight_width());
      copy.row_width = static_cast<uint32_t>(table.rows->row_width());
      copy.keys.reserve(copy.keys.size() + table.rows->size());
      copy.rows.reserve(copy.rows.size() + table.rows->size() * copy.row_width);
      table.rows->ForEach([&](Key key, const float* row) {
        copy.keys.push_back(key);
        copy.rows.insert(copy.rows.end(), row, row + copy.row_width);
      });
      rows += table.rows->size();
    }
  }
  for (auto& [id, copy] : copies) snapshot.tables.push_back(std::move(copy));
  LOG(INFO) << "checkpoint " << meta.checkpoint() << ": copied " << rows << " rows in "
            << MonotonicSeconds() - begin << " s";
  Message reply;
  reply.meta.set_command(proto::SNAPSHOT);
  reply.meta.set_response(true);
  reply.meta.set_sequence(meta.sequence());
  reply.meta.set_checkpoint(meta.checkpoint());
  node_->SendToScheduler(reply);
  writer_->Write(meta.checkpoint_uri(), meta.checkpoint(), std::move(snapshot));
}

void KVServer::Restore(const std::string& uri, const std::string& id,
                       const std::set<size_t>& targets) {
  const double begin = MonotonicSeconds();
  CheckpointStore store(uri);
  const proto::CheckpointManifest manifest = store.ReadManifest(id);
  auto ranges = node_->ranges();
  if (!ranges) throw MakeError("no cluster view to restore key ranges for");
  auto overlaps = [&](Key first, Key last) {
    for (size_t range : targets) {
      if (first <= ranges->last(range) && ranges->begin(range) <= last) return true;
    }
    return false;
  };
  uint64_t loaded = 0;
  int files = 0;
  for (const proto::CheckpointFile& file : manifest.files()) {
    bool relevant = file.spans().empty();
    for (const proto::KeySpan& span : file.spans()) relevant |= overlaps(span.first(), span.last());
    if (!relevant) continue;
    ++files;
    const std::string where = store.storage()->UriOf(id + "/" + file.name());
    const std::string bytes = store.GetFile(id, file.name());
    const ServerSnapshot snapshot = DecodeSnapshot(bytes, where);
    for (const SnapshotTable& saved : snapshot.tables) {
      for (size_t range : targets) {
        Table& table = TableFor(shards_[range], range, saved.table, saved.weight_width);
        if (static_cast<uint32_t>(table.rows->row_width()) != saved.row_width) {
          throw MakeError(where, ": table ", saved.table, " rows have ", saved.row_width,
                          " floats (weights and optimizer state); this job's optimizer ",
                          table.optimizer->name(), " needs ", table.rows->row_width(),
                          " (resume with the optimizer the checkpoint was written with)");
        }
        const Key first = ranges->begin(range), last = ranges->last(range);
        auto it = std::lower_bound(saved.keys.begin(), saved.keys.end(), first);
        for (; it != saved.keys.end() && *it <= last; ++it) {
          const size_t index = static_cast<size_t>(it - saved.keys.begin());
          std::memcpy(table.rows->FindOrInsert(*it), saved.rows.data() + index * saved.row_width,
                      sizeof(float) * saved.row_width);
          ++loaded;
        }
      }
    }
  }
  LOG(INFO) << "resumed from checkpoint " << id << ": loaded " << loaded << " rows of " << files
            << " snapshot file(s) in " << MonotonicSeconds() - begin << " s";
}

KVServer::Table& KVServer::TableFor(Shard& shard, size_t range, uint32_t table, uint32_t width) {
  Table& slot = shard.tables[table];
  if (!slot.rows) {
    auto spec = specs_.find(table);
    if (spec != specs_.end() && spec->second.width != 0 &&
        static_cast<uint32_t>(spec->second.width) != width) {
      shard.tables.erase(table);
      throw MakeError("table ", table, " has rows of width ", spec->second.width,
                      ", the request has width ", width);
    }
    slot.optimizer =
        MakeOptimizer(spec != specs_.end() ? spec->second.optimizer : default_optimizer_);
    const int state = slot.optimizer->StateWidth(static_cast<int>(width));
    // The table is laid out for its key range.
    Key first = 0, last = ~Key{0};
    if (auto ranges = node_->ranges(); ranges && range < ranges->num_ranges()) {
      first = ranges->begin(range);
      last = ranges->last(range);
    }
    slot.rows = std::make_unique<ParameterTable>(
        static_cast<int>(width), state, spec != specs_.end() ? spec->second.initializer : nullptr,
        first, last);
  } else if (static_cast<uint32_t>(slot.rows->weight_width()) != width) {
    throw MakeError("table ", table, " has rows of width ", slot.rows->weight_width(),
                    ", the request has width ", width);
  }
  return slot;
}

KVServer::Shard& KVServer::ShardFor(const DataRequest& request, size_t* range) {
  auto ranges = node_->ranges();
  if (!ranges) throw MakeError("this server has no cluster view yet");
  *range = ranges->RangeOf(request.keys[0]);
  if (request.keys[request.keys.size() - 1] > ranges->last(*range)) {
    throw MakeError("the request's keys span key ranges ", *range, " and ",
                    ranges->RangeOf(request.keys[request.keys.size() - 1]),
                    "; send one request per range");
  }
  auto shard = shards_.find(*range);
  if (shard == shards_.end()) {
    throw MakeError("server ", node_->rank(), " holds no replica of key range ", *range,
                    " (its primary is server ", ranges->server(*range), ")");
  }
  return shard->second;
}

Message KVServer::Dump(uint32_t table, uint32_t width) {
  std::vector<std::pair<Key, const float*>> rows;
  auto ranges = node_->ranges();
  for (const auto& [range, shard] : shards_) {
    // Each range's rows come from its primary only.
    if (!ranges || ranges->server(range) != node_->rank()) continue;
    auto found = shard.tables.find(table);
    if (found == shard.tables.end()) continue;
    if (static_cast<uint32_t>(found->second.rows->weight_width()) != width) {
      throw MakeError("table ", table, " has rows of width ", found->second.rows->weight_width(),
                      ", the request has width ", width);
    }
    found->second.rows->ForEach([&](Key key, const float* row) { rows.emplace_back(key, row); });
  }
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  auto keys = SharedArray<Key>::Allocate(rows.size());
  auto values = SharedArray<float>::Allocate(rows.size() * width);
  for (size_t i = 0; i < rows.size(); ++i) {
    keys[i] = rows[i].first;
    std::memcpy(values.data() + i * width, rows[i].second, sizeof(float) * width);
  }
  Message response;
  response.meta.set_key_count(rows.size());
  response.frames.push_back(AsBytes(keys));
  response.frames.push_back(AsBytes(values));
  return response;
}

void KVServer::Reply(const proto::Meta& request, Message& response) {
  proto::Meta& meta = response.meta;
  meta.set_command(request.command());
  meta.set_sequence(request.sequence());
  meta.set_table(request.table());
  if (meta.key_count() == 0) meta.set_key_count(request.key_count());
  meta.set_value_width(request.value_width());
  meta.set_response(true);
  try {
    node_->Send(request.sender(), response);
  } catch (const Error& e) {
    LOG(WARNING) << "could not answer " << Describe(request) << ": " << e.what();
  }
}

void KVServer::Handle(Message&& message) {
  const proto::Meta& meta = message.meta;
  if (meta.command() == proto::REPLICA_SYNC) {
    if (!members_.count(meta.sender())) {
      LOG(WARNING) << "ignored " << Describe(meta) << ": node " << meta.sender()
                   << " is not in the cluster view (epoch " << view_epoch_ << ")";
      return;
    }
    OnReplicaSync(std::move(message));
    return;
  }
  if (view_epoch_ > 0 && !members_.count(meta.sender())) {
    // Refused (Serve says why); it must not count at the staleness gate.
    Serve(std::move(message), 0);
    return;
  }
  if (!meta.response() && meta.command() == proto::CLOCK) {
    OnClock(meta);
    return;
  }
  if (!meta.response() && meta.command() == proto::PULL && !gate_.Admits(meta.clock())) {
    // Held until the slowest worker catches up; nothing waits on a thread.
    parked_.push_back(Parked{std::move(message), MonotonicSeconds()});
    parked_total_.fetch_add(1);
    return;
  }
  const int sender = meta.sender();
  const int64_t clock = meta.clock();
  // A push passed down a chain does not move this server's gate: the gate
  // counts the batches pushed to the ranges this server is primary of.
  const bool direct = meta.origin() == 0;
  // A repeated push does not move the gate either: a late copy must not
  // count a worker that has left since.
  const bool applied = Serve(std::move(message), 0);
  if (applied && direct && clock > 0) {
    gate_.Advance(sender, clock);
    WakeParked();
  }
}

void KVServer::OnClock(const proto::Meta& meta) {
  // Acknowledged announcements may be resent: apply each once. (A late copy
  // of a leave must not remove a worker that has joined again since.)
  if (meta.ack() && !clocks_applied_[meta.sender()].Insert(meta.sequence())) {
    duplicates_.fetch_add(1);
    Message response;
    Reply(meta, response);
    return;
  }
  if (meta.clock() == kLeaveClock) {
    gate_.Remove(meta.sender());
  } else {
    gate_.Advance(meta.sender(), meta.clock());
  }
  if (meta.ack()) {
    Message response;
    Reply(meta, response);
  }
  WakeParked();
}

namespace {

// Whether `view` says server `rank` is waiting for `range`'s copy.
bool Copying(const proto::ClusterView& view, size_t range, int rank) {
  if (range >= static_cast<size_t>(view.ranges_size())) return false;
  const auto& copying = view.ranges(static_cast<int>(range)).copying();
  return std::find(copying.begin(), copying.end(), rank) != copying.end();
}

}  // namespace

void KVServer::UpdateShards(const proto::ClusterView& view, const RangeMap& ranges,
                            bool first_view) {
  const int rank = node_->rank();
  for (auto it = shards_.begin(); it != shards_.end();) {
    if (it->first < ranges.num_ranges() && ranges.Holds(it->first, rank)) {
      ++it;
      continue;
    }
    LOG(WARNING) << "key range " << it->first << " is no longer held by server " << rank;
    it = shards_.erase(it);
  }
  for (auto& [range, shard] : shards_) {
    const bool primary = ranges.server(range) == rank;
    if (primary && !shard.primary) {
      shard.primary_since = MonotonicSeconds();
      LOG(INFO) << "key range " << range << ": this server is its primary now";
    }
    shard.primary = primary;
  }
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
    int id = -1;
    try {
      id = node_->ServerId(predecessor);
    } catch (const Error&) {
      continue;  // asked at the next view
    }
    if (id == shard.asked) continue;
    shard.asked = id;
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
}

void KVServer::SendShardCopy(size_t range, const Shard& shard, int to, uint64_t sequence) {
  const double begin = MonotonicSeconds();
  ShardState state;
  state.range = static_cast<uint32_t>(range);
  uint64_t rows = 0;
  for (const auto& [id, table] : shard.tables) {
    std::vector<std::pair<Key, const float*>> sorted;
    table.rows->ForEach([&](Key key, const float* row) { sorted.emplace_back(key, row); });
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    SnapshotTable copy;
    copy.table = id;
    copy.weight_width = static_cast<uint32_t>(table.rows->weight_width());
    copy.row_width = static_cast<uint32_t>(table.rows->row_width());
    copy.keys.reserve(sorted.size());
    copy.rows.reserve(sorted.size() * copy.row_width);
    for (const auto& [key, row] : sorted) {
      copy.keys.push_back(key);
      copy.rows.insert(copy.rows.end(), row, row + copy.row_width);
    }
    rows += sorted.size();
    state.tables.push_back(std::move(copy));
  }
  for (const auto& [sender, window] : shard.applied) {
    state.applied.emplace_back(
        sender, std::vector<uint64_t>(window.sequences().begin(), window.sequences().end()));
  }
  Message message = EncodeShardCopy(state);
  message.meta.set_sequence(sequence);
  try {
    node_->Send(to, message);
    LOG(INFO) << "key range " << range << ": sent " << rows << " rows to node " << to
              << " (copied in " << MonotonicSeconds() - begin << " s)";
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
}

void KVServer::OnReplicaSync(Message&& message) {
  const proto::Meta& meta = message.meta;
  const size_t range = meta.shard().range();
  auto found = shards_.find(range);
  if (!meta.response()) {
    // A replica joining the chain behind this server asks for the range. From
    // here on, pushes passed down reach it after this copy (links keep order).
    if (found == shards_.end()) {
      LOG(WARNING) << "node " << meta.sender() << " asked for key range " << range
                   << ", which this server does not hold";
    } else if (!found->second.ready) {
      found->second.askers.emplace_back(meta.sender(), meta.sequence());  // answered when it is
    } else {
      SendShardCopy(range, found->second, meta.sender(), meta.sequence());
    }
    return;
  }
  if (found == shards_.end() || found->second.ready || meta.sender() != found->second.asked) {
    LOG(WARNING) << "ignored a copy of key range " << range << " from node " << meta.sender()
                 << ": not waiting for one from it";
    return;
  }
  Shard& shard = found->second;
  try {
    const ShardState state = DecodeShardCopy(message);
    shard.tables.clear();
    shard.applied.clear();
    uint64_t rows = 0;
    for (const SnapshotTable& saved : state.tables) {
      Table& table = TableFor(shard, range, saved.table, saved.weight_width);
      if (static_cast<uint32_t>(table.rows->row_width()) != saved.row_width) {
        throw MakeError("key range ", range, " from node ", meta.sender(), ": table ", saved.table,
                        " rows have ", saved.row_width, " floats; this server's ",
                        table.optimizer->name(), " optimizer needs ", table.rows->row_width());
      }
      for (size_t i = 0; i < saved.keys.size(); ++i) {
        std::memcpy(table.rows->FindOrInsert(saved.keys[i]),
                    saved.rows.data() + i * saved.row_width, sizeof(float) * saved.row_width);
      }
      rows += saved.keys.size();
    }
    for (const auto& [sender, sequences] : state.applied) {
      DedupeWindow& window = shard.applied[sender];
      for (uint64_t sequence : sequences) window.Insert(sequence);
    }
    LOG(INFO) << "key range " << range << ": received " << rows << " rows from node "
              << meta.sender() << "; this server holds a replica of it again (" << shard.held.size()
              << " push(es) held meanwhile go on now)";
  } catch (const Error& e) {
    rejected_.fetch_add(1);
    shard.tables.clear();
    shard.asked = -1;  // asked again at the next view
    LOG(ERROR) << "refused a copy of key range " << range << ": " << e.what();
    return;
  }
  ShardReady(range, shard);
}

void KVServer::OnView(const proto::ClusterView& view) {
  const bool first_view = view_epoch_ == 0;
  auto ranges = node_->ranges();
  if (ranges) UpdateShards(view, *ranges, first_view);
  std::string replace_uri;
  const std::string replace_from = node_->restore_checkpoint(&replace_uri);
  if (!restored_ && (!view.resume_checkpoint().empty() || !replace_from.empty())) {
    restored_ = true;
    // A resumed job (every replica loads its ranges), or a server replacing
    // one that left (the ranges it is the only holder of).
    std::set<size_t> targets;
    for (const auto& [range, shard] : shards_) {
      if (shard.ready) targets.insert(range);
    }
    try {
      if (!replace_from.empty()) {
        Restore(replace_uri, replace_from, targets);
      } else {
        Restore(view.resume_uri(), view.resume_checkpoint(), targets);
      }
    } catch (const std::exception& e) {
      LOG(ERROR) << "cannot resume: " << e.what();
      std::lock_guard<std::mutex> lock(failure_mutex_);
      failure_ = std::string("cannot resume: ") + e.what();
    }
  }
  std::set<int> workers;
  members_.clear();
  view_epoch_ = view.epoch();
  for (const auto& node : view.nodes()) {
    if (node.role() == proto::WORKER) workers.insert(node.id());
    members_.insert(node.id());
  }
  if (ranges) AskForRanges(*ranges);
  gate_.RemoveMissing(workers);
  // Pulls held for nodes that left are refused now, not held forever.
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (members_.count(it->message.meta.sender())) {
      ++it;
      continue;
    }
    Message message = std::move(it->message);
    it = parked_.erase(it);
    Serve(std::move(message), 0);
  }
  WakeParked();
}

void KVServer::WakeParked() {
  if (parked_.empty()) return;
  const double now = MonotonicSeconds();
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (!gate_.Admits(it->message.meta.clock())) {
      ++it;
      continue;
    }
    const int64_t waited_us = static_cast<int64_t>((now - it->since) * 1e6);
    Message message = std::move(it->message);
    it = parked_.erase(it);
    Serve(std::move(message), std::max<int64_t>(waited_us, 1));
  }
}

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

bool KVServer::Serve(Message&& message, int64_t waited_us) {
  const proto::Meta& meta = message.meta;
  if (meta.response()) {
    // Answering a response could bounce between two nodes forever.
    rejected_.fetch_add(1);
    LOG(WARNING) << "ignored " << Describe(meta) << ": servers take requests, not responses";
    return false;
  }
  Message response;
  bool applied = false;
  try {
    if (std::string failed = failure(); !failed.empty()) throw Error(failed);
    if (view_epoch_ > 0 && !members_.count(meta.sender())) {
      throw MakeError("node ", meta.sender(), " is not in the cluster view (epoch ", view_epoch_,
                      "): it left the cluster");
    }
    DataRequest request = ParseDataRequest(message);
    if (meta.command() == proto::DUMP) {
      response = Dump(request.table, request.width);
      served_.fetch_add(1);
      Reply(meta, response);
      return false;
    }
    if (meta.origin() != 0 && meta.command() != proto::PUSH) {
      throw MakeError("only pushes are passed down a replica chain");
    }
    if (request.keys.size() == 0) {
      served_.fetch_add(1);
      if (meta.command() == proto::PULL) {
        response.frames.push_back(AsBytes(SharedArray<float>()));
      }
      Reply(meta, response);
      return false;
    }
    size_t range = 0;
    Shard& shard = ShardFor(request, &range);
    if (meta.command() == proto::PUSH) {
      const int origin = meta.origin() != 0 ? meta.origin() : meta.sender();
      auto ranges = node_->ranges();
      if (meta.origin() == 0 && ranges->server(range) != node_->rank()) {
        throw MakeError("server ", node_->rank(), " is not the primary of key range ", range,
                        " (server ", ranges->server(range), " is)");
      }
      if (meta.origin() != 0) {
        // Only the replica before this one in the range's chain passes pushes on.
        const int predecessor = ranges->Predecessor(range, node_->rank());
        int expected = -1;
        try {
          if (predecessor >= 0) expected = node_->ServerId(predecessor);
        } catch (const Error&) {
        }
        if (meta.sender() != expected) {
          throw MakeError("node ", meta.sender(), " passed on a push of key range ", range,
                          ", but it is not this server's predecessor in the range's chain");
        }
      }
      if (!shard.ready) {
        // Passed down before this replica has the range: it goes on once the
        // range's copy (which will include it) has arrived. Past the bound,
        // dropped: the worker resends it.
        if (meta.origin() == 0) throw MakeError("key range ", range, " is not ready here");
        if (shard.held.size() < kMaxHeldPushes) shard.held.push_back(std::move(message));
        return false;
      }
      Table& entry = TableFor(shard, range, request.table, request.width);
      if (shard.applied[origin].Insert(meta.sequence())) {
        entry.rows->Push(request.keys.data(), request.keys.size(), request.values.data(),
                         entry.optimizer.get());
        applied = true;
        if (shard.primary_since > 0 && meta.origin() == 0) {
          LOG(INFO) << "key range " << range << ": first push served since this server became "
                    << "its primary, " << MonotonicSeconds() - shard.primary_since << " s ago";
          shard.primary_since = 0;
        }
      } else {
        duplicates_.fetch_add(1);  // applied before: passed on and acknowledged all the same
      }
      served_.fetch_add(1);
      PassDown(message, range, origin);
      return applied;
    }
    if (!shard.ready) throw MakeError("key range ", range, " is not ready here");
    ParameterTable* table = TableFor(shard, range, request.table, request.width).rows.get();
    response.meta.set_min_clock(gate_.MinClock());
    response.meta.set_waited_us(waited_us);
    if (request.keys.size() == 1 && table->shares_rows()) {
      // One long row: sent straight from the table, copied only if a push
      // comes while it is still being sent.
      response.frames.push_back(AsBytes(table->SharedWeights(request.keys[0])));
    } else {
      auto values = SharedArray<float>::Allocate(request.keys.size() * request.width);
      table->Pull(request.keys.data(), request.keys.size(), values.data());
      response.frames.push_back(AsBytes(values));
    }
    served_.fetch_add(1);
  } catch (const Error& e) {
    rejected_.fetch_add(1);
    LOG(WARNING) << "rejected " << Describe(meta) << ": " << e.what();
    response.frames.clear();
    response.meta.set_error(e.what());
  }
  Reply(meta, response);
  return applied;
}

}  // namespace keel
