#include "server/kv_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "base/time.h"
#include "base/utf8.h"
#include "kv/kv_worker.h"
#include "server/replacement.h"

namespace keel {

static_assert(2 * kResendSequenceHorizon <= DedupeWindow::kDefaultCapacity,
              "a resent request must still be in the server's dedupe window");

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
  writer_ = std::make_unique<SnapshotWriter>(
      [this](const std::string& checkpoint, const proto::CheckpointFile& file,
             const std::string& error) { ReportSnapshot(checkpoint, file, error); });
}

KVServer::~KVServer() {
  writer_.reset();  // snapshots already copied are written and reported first
  node_->Stop();
}

std::string KVServer::failure() const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return failure_;
}

void KVServer::ReportSnapshot(const std::string& checkpoint, const proto::CheckpointFile& file,
                              const std::string& error) {
  Message report;
  report.meta.set_command(proto::SNAPSHOT);
  report.meta.set_checkpoint(checkpoint);
  *report.meta.mutable_file() = file;
  report.meta.set_error(ValidUtf8(error));
  try {
    node_->SendToScheduler(report);
  } catch (const std::exception& e) {
    LOG(WARNING) << "checkpoint " << checkpoint << ": could not report: " << e.what();
  }
}

void KVServer::Handle(Message&& message) {
  const proto::Meta& meta = message.meta;
  if (meta.command() == proto::REPLICA_SYNC) {
    auto member = members_.find(meta.sender());
    if (member != members_.end() && member->second != proto::SERVER) {
      LOG(WARNING) << "ignored " << Describe(meta) << ": node " << meta.sender()
                   << " is not a server";
      return;
    }
    if (member == members_.end()) {
      LOG(WARNING) << "ignored " << Describe(meta) << ": node " << meta.sender()
                   << " is not in the cluster view (epoch " << view_epoch_ << ")";
      return;
    }
    OnReplicaSync(std::move(message));
    return;
  }
  const double arrived = MonotonicSeconds();
  if (!SenderProblem(meta).empty()) {
    // Refused (Serve says why); it must not count at the staleness gate.
    Serve(std::move(message), 0);
    return;
  }
  if (!meta.response() && meta.command() == proto::CLOCK) {
    OnClock(meta);
    return;
  }
  if (!meta.response() && meta.command() == proto::PULL && !gate_.Admits(meta.clock())) {
    Park(std::move(message), arrived);
    return;
  }
  const int sender = meta.sender();
  const int64_t clock = meta.clock();
  // A push passed down a chain does not move this server's gate: the gate
  // counts the batches pushed to the ranges this server is primary of.
  const bool direct = meta.origin() == 0;
  // A repeated push does not move the gate either: a late copy must not
  // count a worker that has left since.
  const bool push = meta.command() == proto::PUSH;
  const bool applied = ServeObserved(std::move(message), 0, arrived);
  CountRememberedSenders();
  if (push) PublishSizes();  // only pushes make rows (or wait for a range's copy)
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

void KVServer::OnView(const proto::ClusterView& view) {
  const bool first_view = view_epoch_ == 0;
  if (view.checkpoint_delta() && !track_changes_) {
    track_changes_ = true;
    for (auto& [range, shard] : shards_) {
      for (auto& [id, table] : shard.tables) table.rows->EnableStamps();
    }
  }
  auto ranges = node_->ranges();
  if (ranges) UpdateShards(view, *ranges, first_view);
  RestoreOnce(view);
  const std::set<int> workers = UpdateMembers(view);
  ForgetDeparted();
  if (ranges) AskForRanges(*ranges);
  gate_.RemoveMissing(workers);
  RefuseParkedOfLeavers();
  WakeParked();
  CountRememberedSenders();
  PublishSizes();
}

void KVServer::ForgetDeparted() {
  auto forget = [this](std::unordered_map<int, DedupeWindow>& windows) {
    for (auto it = windows.begin(); it != windows.end();) {
      it = members_.count(it->first) ? std::next(it) : windows.erase(it);
    }
  };
  forget(clocks_applied_);
  for (auto& [range, shard] : shards_) {
    forget(shard.applied);
    // Pre-copies of servers that left: their deltas will not be asked for.
    for (auto it = shard.precopies.begin(); it != shard.precopies.end();) {
      it = members_.count(it->first) ? std::next(it) : shard.precopies.erase(it);
    }
    for (auto it = shard.precopy_generations.begin(); it != shard.precopy_generations.end();) {
      it = members_.count(it->first) ? std::next(it) : shard.precopy_generations.erase(it);
    }
  }
}

void KVServer::CountRememberedSenders() {
  size_t count = clocks_applied_.size();
  for (const auto& [range, shard] : shards_) count += shard.applied.size();
  remembered_senders_.store(count);
}

void KVServer::RestoreOnce(const proto::ClusterView& view) {
  std::string replace_uri;
  const std::string replace_from = Replacement(*node_).restore_checkpoint(&replace_uri);
  if (restored_ || (view.resume_checkpoint().empty() && replace_from.empty())) return;
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
      // The rows are the checkpoint's exactly: the first checkpoint may be a
      // delta of it.
      for (size_t range : targets) {
        Shard& shard = shards_[range];
        shard.tracked = DeltaToken(view.resume_uri(), view.resume_checkpoint());
        for (auto& [id, table] : shard.tables) {
          table.copied_stamp = table.rows->stamp();
          table.rows->AdvanceStamp();
        }
      }
    }
  } catch (const std::exception& e) {
    LOG(ERROR) << "cannot resume: " << e.what();
    std::lock_guard<std::mutex> lock(failure_mutex_);
    failure_ = std::string("cannot resume: ") + e.what();
  }
}

std::set<int> KVServer::UpdateMembers(const proto::ClusterView& view) {
  std::set<int> workers;
  members_.clear();
  view_epoch_ = view.epoch();
  for (const auto& node : view.nodes()) {
    if (node.role() == proto::WORKER) workers.insert(node.id());
    members_[node.id()] = node.role();
  }
  return workers;
}

void KVServer::Park(Message&& message, double arrived) {
  // Held until the slowest worker catches up; nothing waits on a thread. The
  // worker hears so at once, and stops counting the wait as a lost request
  // (kv/kv_worker.h). A copy it sent again to ask is not held twice.
  const int sender = message.meta.sender();
  const uint64_t sequence = message.meta.sequence();
  const bool repeated = std::any_of(parked_.begin(), parked_.end(), [&](const Parked& parked) {
    return parked.message.meta.sender() == sender && parked.message.meta.sequence() == sequence;
  });
  Message held;
  held.meta.set_held(true);
  Reply(message.meta, held);
  if (repeated) return;
  parked_.push_back(Parked{std::move(message), arrived});
  parked_total_.fetch_add(1);
}

void KVServer::RefuseParkedOfLeavers() {
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
}

void KVServer::WakeParked() {
  if (parked_.empty()) return;
  const double now = MonotonicSeconds();
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (!gate_.Admits(it->message.meta.clock())) {
      ++it;
      continue;
    }
    const double since = it->since;
    const int64_t waited_us = static_cast<int64_t>((now - since) * 1e6);
    Message message = std::move(it->message);
    it = parked_.erase(it);
    ServeObserved(std::move(message), std::max<int64_t>(waited_us, 1), since);
  }
}

bool KVServer::ServeObserved(Message&& message, int64_t waited_us, double arrived) {
  if (!observer_) return Serve(std::move(message), waited_us);
  const proto::Meta meta = message.meta;
  RequestRecord record;
  record.command = meta.command();
  record.server_rank = node_->rank();
  record.table = meta.table();
  for (const Bytes& frame : message.frames) record.bytes += frame.size();
  const bool applied = Serve(std::move(message), waited_us);
  if (record.command != proto::PUSH && record.command != proto::PULL) return applied;
  if (record.command == proto::PULL) {
    record.bytes += uint64_t{meta.key_count()} * meta.value_width() * sizeof(float);
  }
  record.seconds = MonotonicSeconds() - arrived;
  observer_(record);
  return applied;
}

void KVServer::PublishSizes() {
  size_t waiting = 0, held = 0;
  std::lock_guard<std::mutex> lock(sizes_mutex_);
  sizes_.clear();  // keeps its capacity: no allocation once the tables are known
  for (const auto& [range, shard] : shards_) {
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
  serving_.store(view_epoch_ > 0 && waiting == 0);
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

}  // namespace keel
