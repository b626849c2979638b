#include "server/kv_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "base/error.h"
#include "base/time.h"
#include "kv/kv_worker.h"
#include "server/held_copy.h"

namespace keel {

static_assert(2 * kResendSequenceHorizon <= DedupeWindow::kDefaultCapacity,
              "a resent request must still be in the server's dedupe window");

KVServer::KVServer(Node* node, const OptimizerOptions& default_optimizer,
                   std::map<uint32_t, TableSpec> tables, int64_t staleness)
    : state_(node, default_optimizer, std::move(tables)), node_(node), gate_(staleness) {
  ChainReplication::Hooks hooks;
  hooks.serve_held = [this](Message&& push) { requests_->Serve(std::move(push), 0); };
  hooks.readiness_changed = [this] { PublishSizes(); };
  chain_ = std::make_unique<ChainReplication>(&state_, std::move(hooks));
  requests_ = std::make_unique<RequestServing>(
      &state_, &gate_, [this](const Message& push, size_t range, int origin) {
        chain_->PassDown(push, range, origin);
      });
  node_->SetViewHandler([this](const proto::ClusterView& view) { OnView(view); });
  // Each heartbeat says how many pushes each range's rows here reflect.
  node_->SetHeartbeatFields([this](proto::Meta* beat) {
    for (const auto& [range, pushes] : state_.range_pushes.All()) {
      proto::RangePushes* entry = beat->add_range_pushes();
      entry->set_range(static_cast<uint32_t>(range));
      entry->set_pushes(pushes);
    }
  });
  // Check every optimizer now, not at the first request.
  MakeOptimizer(state_.default_optimizer);
  for (const auto& [id, spec] : state_.specs) MakeOptimizer(spec.optimizer);
  node_->SetDataHandler([this](Message&& message) { Handle(std::move(message)); });
  node_->SetControlHandler([this](Message&& message) {
    if (message.meta.command() == proto::SNAPSHOT) {
      snapshots_->OnSnapshot(message.meta);
    } else {
      LOG(WARNING) << "ignored unexpected " << Describe(message.meta);
    }
  });
  snapshots_ = std::make_unique<SnapshotRestore>(&state_);
}

void KVServer::SetApplyThreads(int threads) {
  if (threads < 1 || threads > kMaxApplyThreads) {
    throw MakeError("apply threads: ", threads, " is not in 1..", kMaxApplyThreads);
  }
  state_.apply_pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
}

KVServer::~KVServer() {
  node_->SetHeartbeatFields(nullptr);
  snapshots_->FinishWriting();  // snapshots already copied are written and reported first
  node_->Stop();
}

void KVServer::Handle(Message&& message) {
  const proto::Meta& meta = message.meta;
  if (meta.command() == proto::REPLICA_SYNC) {
    auto member = state_.members.find(meta.sender());
    if (member != state_.members.end() && member->second != proto::SERVER) {
      LOG(WARNING) << "ignored " << Describe(meta) << ": node " << meta.sender()
                   << " is not a server";
      return;
    }
    if (member == state_.members.end()) {
      LOG(WARNING) << "ignored " << Describe(meta) << ": node " << meta.sender()
                   << " is not in the cluster view (epoch " << state_.view_epoch << ")";
      return;
    }
    chain_->OnReplicaSync(std::move(message));
    return;
  }
  const double arrived = MonotonicSeconds();
  if (!requests_->SenderProblem(meta).empty()) {
    // Refused (Serve says why); it must not count at the staleness gate.
    requests_->Serve(std::move(message), 0);
    return;
  }
  if (!meta.response() && meta.command() == proto::CLOCK) {
    OnClock(message);
    return;
  }
  const bool push = meta.command() == proto::PUSH;
  std::optional<GateSlot> slot;
  if (!meta.response() && (push || meta.command() == proto::PULL)) {
    slot = requests_->SlotOf(message);
  }
  if (!meta.response() && meta.command() == proto::PULL && slot &&
      !gate_.Admits(*slot, meta.clock())) {
    requests_->Park(std::move(message), *slot, arrived);
    return;
  }
  // A push counts at the gate in its own slot only, for the worker it came
  // from (passed down a chain too: a promoted replica knows how far each
  // worker's pushes went). Only a worker's own push may count a worker not
  // counted yet: a late copy must not count one that has left since, nor
  // must a repeat (not applied).
  const bool direct = meta.origin() == 0;
  const int worker = direct ? meta.sender() : meta.origin();
  const int64_t clock = meta.clock();
  const bool applied = requests_->ServeObserved(std::move(message), 0, arrived);
  ForgetExpiredDepartures();
  CountRememberedSenders();
  if (push) PublishSizes();  // only pushes make rows (or wait for a range's copy)
  if (applied && slot && clock > 0) {
    gate_.AdvanceSlot(worker, *slot, clock, /*join=*/direct);
    requests_->WakeParked();
  }
}

void KVServer::OnClock(const Message& message) {
  const proto::Meta& meta = message.meta;
  // The slots the announcement does not speak for: their pushes do.
  std::vector<GateSlot> pushed;
  if (!message.frames.empty()) {
    const Bytes& frame = message.frames[0];
    if (message.frames.size() != 1 || frame.size() % (2 * sizeof(uint32_t)) != 0) {
      const std::string why =
          MakeError("a CLOCK carries one frame of (key range, table) pairs of ",
                    2 * sizeof(uint32_t), " bytes; this one has ", message.frames.size(),
                    " frames, the first of ", frame.size(), " bytes")
              .what();
      const uint64_t refused = state_.counters.rejected.fetch_add(1) + 1;
      LOG(WARNING) << "refused " << Describe(meta) << ": " << why << " (" << refused
                   << " requests refused so far)";
      Message response;
      response.meta.set_error(why);
      state_.Reply(meta, response);
      return;
    }
    const auto values = frame.As<const uint32_t>();
    for (size_t i = 0; i + 1 < values.size(); i += 2) pushed.emplace_back(values[i], values[i + 1]);
  }
  // Acknowledged announcements may be resent: apply each once. (A late copy
  // of a leave must not remove a worker that has joined again since.)
  if (meta.ack() && !clocks_applied_[meta.sender()].Insert(meta.sequence())) {
    state_.counters.duplicates.fetch_add(1);
    Message response;
    state_.Reply(meta, response);
    return;
  }
  if (meta.clock() == kLeaveClock) {
    gate_.Remove(meta.sender());
  } else {
    gate_.Advance(meta.sender(), meta.clock(), pushed);
  }
  if (meta.ack()) {
    Message response;
    state_.Reply(meta, response);
  }
  requests_->WakeParked();
}

void KVServer::OnView(const proto::ClusterView& view) {
  const bool first_view = state_.view_epoch == 0;
  if (view.checkpoint_delta() && !state_.track_changes) {
    state_.track_changes = true;
    for (auto& [range, shard] : state_.shards) {
      for (auto& [id, table] : shard.tables) table.rows->EnableStamps();
    }
  }
  // Ranges may have moved, servers come or gone, rows been restored: the
  // workers send their key lists again (answered unknown_key_list).
  if (view.epoch() != state_.view_epoch) state_.key_lists.Clear();
  auto ranges = node_->ranges();
  if (ranges) chain_->UpdateShards(view, *ranges, first_view);
  snapshots_->RestoreOnce(view);
  const std::set<int> workers = UpdateMembers(view);
  ForgetDeparted();
  next_departure_check_ = 0;
  ForgetExpiredDepartures(&view);
  if (ranges) chain_->AskForRanges(*ranges);
  gate_.RemoveMissing(workers);
  requests_->RefuseParkedOfLeavers();
  requests_->WakeParked();
  CountRememberedSenders();
  PublishSizes();
}

void KVServer::ForgetDeparted() {
  const double now = MonotonicSeconds();
  for (auto it = departed_at_.begin(); it != departed_at_.end();) {
    it = state_.members.count(it->first) ? departed_at_.erase(it) : std::next(it);
  }
  // CLOCK records go at once (their sender is refused once it is not a
  // member); a departed worker's push records are only noted here, and go in
  // ForgetExpiredDepartures once the grace period is over.
  for (auto it = clocks_applied_.begin(); it != clocks_applied_.end();) {
    it = state_.members.count(it->first) ? std::next(it) : clocks_applied_.erase(it);
  }
  for (auto& [range, shard] : state_.shards) {
    for (const auto& [sender, window] : shard.applied) {
      if (!state_.members.count(sender)) departed_at_.emplace(sender, now);
    }
    shard.reads.ForgetWorkersUnless(
        [this](int worker) { return state_.members.count(worker) > 0; });
    // Pre-copies of servers that left: their deltas will not be asked for.
    for (auto it = shard.precopies.begin(); it != shard.precopies.end();) {
      it = state_.members.count(it->first) ? std::next(it) : shard.precopies.erase(it);
    }
    for (auto it = shard.precopy_generations.begin(); it != shard.precopy_generations.end();) {
      it = state_.members.count(it->first) ? std::next(it) : shard.precopy_generations.erase(it);
    }
  }
}

void KVServer::ForgetExpiredDepartures(const proto::ClusterView* given) {
  if (departed_at_.empty()) return;
  const double now = MonotonicSeconds();
  // At most about once a second between views: a request pays one clock read.
  if (now < next_departure_check_) return;
  next_departure_check_ = now + 1.0;
  std::shared_ptr<const proto::ClusterView> latest;
  if (!given) latest = node_->view();
  const proto::ClusterView* view = given ? given : latest.get();
  for (auto it = departed_at_.begin(); it != departed_at_.end();) {
    const int sender = it->first;
    bool kept = false;
    for (auto& [range, shard] : state_.shards) {
      const auto window = shard.applied.find(sender);
      if (window == shard.applied.end()) continue;
      if (now - it->second < departed_grace_s_ || !view ||
          KeepsDepartedRecords(*view, range, shard)) {
        kept = true;
      } else {
        shard.applied.erase(window);
      }
    }
    it = kept ? std::next(it) : departed_at_.erase(it);
  }
}

void KVServer::CountRememberedSenders() {
  size_t count = clocks_applied_.size(), readers = 0;
  for (const auto& [range, shard] : state_.shards) {
    count += shard.applied.size();
    readers += shard.reads.remembered();
  }
  state_.counters.remembered_senders.store(count);
  state_.counters.remembered_readers.store(readers);
}

std::set<int> KVServer::UpdateMembers(const proto::ClusterView& view) {
  std::set<int> workers;
  state_.members.clear();
  state_.view_epoch = view.epoch();
  for (const auto& node : view.nodes()) {
    if (node.role() == proto::WORKER) workers.insert(node.id());
    state_.members[node.id()] = node.role();
  }
  return workers;
}

void KVServer::PublishSizes() {
  size_t waiting = 0, held = 0;
  std::lock_guard<std::mutex> lock(sizes_mutex_);
  sizes_.clear();  // keeps its capacity: no allocation once the tables are known
  for (const auto& [range, shard] : state_.shards) {
    if (!shard.ready) ++waiting;
    held += shard.held.size();
    for (const auto& [id, table] : shard.tables) {
      auto size = std::find_if(sizes_.begin(), sizes_.end(),
                               [id = id](const TableSize& s) { return s.table == id; });
      if (size == sizes_.end()) size = sizes_.insert(sizes_.end(), TableSize{id, 0, 0});
      size->rows += table.rows->size();
      size->bytes += table.rows->memory_bytes();
    }
  }
  ranges_waiting_.store(waiting);
  held_pushes_.store(held);
  serving_.store(state_.view_epoch > 0 && waiting == 0);
}

std::vector<KVServer::TableSize> KVServer::table_sizes() const {
  std::vector<TableSize> sizes;
  {
    std::lock_guard<std::mutex> lock(sizes_mutex_);
    sizes = sizes_;
  }
  std::sort(sizes.begin(), sizes.end(),
            [](const TableSize& a, const TableSize& b) { return a.table < b.table; });
  return sizes;
}

proto::HeldCopy KVServer::KeepCopy(const std::string& folder) const {
  return WriteHeldCopy(state_, node_->rank(), folder);
}

}  // namespace keel
