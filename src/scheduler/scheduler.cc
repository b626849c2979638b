#include "scheduler/scheduler.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <tuple>

#include "base/error.h"
#include "base/json.h"
#include "base/time.h"
#include "kv/keys.h"
#include "kv/node.h"

namespace keel {
namespace {

VanOptions SchedulerVan(const SchedulerOptions& options) {
  if (options.num_servers <= 0 || options.num_workers <= 0) {
    throw MakeError("a cluster needs at least one server and one worker (--num_servers ",
                    options.num_servers, ", --num_workers ", options.num_workers, ")");
  }
  RangeMap::Even(options.num_servers, options.replication);  // checks the replication
  VanOptions van;
  van.bind_host = options.bind_host;
  van.port = options.port;
  return van;
}

Message Control(proto::Command command) {
  Message message;
  message.meta.set_command(command);
  message.meta.set_sender(kSchedulerId);
  message.meta.set_response(true);
  return message;
}

}  // namespace

Scheduler::Scheduler(const SchedulerOptions& options)
    : options_(options), membership_(options.membership_log), van_(SchedulerVan(options)) {
  // Node ids are never reused, across a restart of the scheduler too: a
  // scheduler started again does not know the ids its predecessor gave out
  // until their nodes register again, and a new node may come first. So each
  // run gives out ids from a block of its own, placed by its start time (in
  // milliseconds, 1000 ids a millisecond, repeating every 16.7 minutes).
  const int64_t ms = WallMillis();
  next_id_ = 1 + static_cast<int>(ms % 1000000) * 1000;
  checkpoints_ = std::make_unique<CheckpointCoordinator>(
      options_.checkpoint, [this](int node, Message& message) { SendTo(node, message); },
      [this](const std::string& id, const std::string& error) {
        std::lock_guard<std::mutex> lock(mutex_);
        checkpoints_->FinishCommit(id, error);
        changed_.notify_all();
      });
}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  van_.Start([this](Message&& message) { OnMessage(std::move(message)); });
  monitor_thread_ = std::thread([this] { MonitorLoop(); });
  LOG(INFO) << "scheduler listening on " << options_.bind_host << ":" << van_.port()
            << ", expecting " << options_.num_servers << " server(s) and " << options_.num_workers
            << " worker(s)";
}

void Scheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  changed_.notify_all();
  if (monitor_thread_.joinable()) monitor_thread_.join();
  checkpoints_.reset();  // its commit thread calls back into this object
  std::vector<std::thread> probes;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    probes.swap(probes_);
  }
  for (auto& probe : probes) probe.join();
  van_.Stop();
}

std::set<int> Scheduler::Live(proto::Role role) const {
  std::set<int> ids;
  for (const auto& [id, member] : members_) {
    if (member.info.role() == role) ids.insert(id);
  }
  return ids;
}

void Scheduler::OnCheckpoint(const proto::Meta& meta) {
  const Member& member = members_[meta.sender()];
  if (member.info.role() != proto::WORKER) {
    LOG(WARNING) << "ignored CHECKPOINT from node " << meta.sender() << ": not a worker";
    return;
  }
  checkpoints_->OnWorker(meta.sender(), member.info.rank(), meta, Live(proto::WORKER),
                         Live(proto::SERVER), options_.num_servers);
}

proto::ClusterView Scheduler::view() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return view_;
}

int Scheduler::WaitForJob(double timeout_s) {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool done = changed_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                                      [this] { return JobOver() && !checkpoints_->busy(); });
  if (!done) return -1;
  int failed = 0;
  int succeeded = 0;
  for (const auto& [id, error] : done_) succeeded += error.empty();
  for (const auto& [rank, vacancy] : vacant_) {
    LOG(WARNING) << "worker " << rank << " left (" << vacancy.reason
                 << ") and was not replaced; the other workers read its data";
    if (succeeded == 0) ++failed;
  }
  for (const auto& [id, error] : done_) {
    if (error.empty()) continue;
    ++failed;
    auto member = members_.find(id);
    LOG(ERROR) << "worker " << (member != members_.end() ? member->second.info.rank() : -1)
               << " (node " << id << ") failed: " << error;
  }
  for (const auto& [id, member] : members_) {
    Message shutdown = Control(proto::SHUTDOWN);
    SendTo(id, shutdown);
  }
  LOG(INFO) << "job finished: " << succeeded << " of " << options_.num_workers
            << " worker(s) succeeded"
            << (vacant_.empty() ? std::string()
                                : ", " + std::to_string(vacant_.size()) +
                                      " left without a replacement (the others read their data)");
  return failed;
}

bool Scheduler::JobOver() const {
  if (!published_) return false;
  for (const auto& [id, member] : members_) {
    if (member.info.role() == proto::WORKER && !done_.count(id)) return false;
  }
  const double now = MonotonicSeconds();
  for (const auto& [rank, vacancy] : vacant_) {
    if (now - vacancy.since < options_.worker_replace_timeout_s) return false;
  }
  return !done_.empty() || !vacant_.empty();
}

void Scheduler::SendTo(int node_id, Message& message) {
  message.meta.set_sender(kSchedulerId);
  message.meta.set_epoch(view_.epoch());
  try {
    van_.Send(node_id, message);
  } catch (const Error& e) {
    LOG(WARNING) << "could not send " << Describe(message.meta) << " to node " << node_id << ": "
                 << e.what();
  }
}

void Scheduler::OnMessage(Message&& message) {
  const proto::Meta& meta = message.meta;
  std::lock_guard<std::mutex> lock(mutex_);
  if (meta.command() == proto::REGISTER) {
    OnRegister(message);
    return;
  }
  auto member = members_.find(meta.sender());
  if (member == members_.end()) {
    if (meta.sender() > 0 && !removed_ids_.count(meta.sender())) {
      // A node registered with an earlier run of this scheduler (it was
      // restarted): it registers again, keeping its id and rank.
      if (meta.command() == proto::HEARTBEAT && !meta.node().address().empty()) {
        Message reply = Control(proto::HEARTBEAT);
        reply.meta.set_rejoin(true);
        try {
          if (!van_.IsConnected(meta.sender())) van_.Connect(meta.sender(), meta.node().address());
          SendTo(meta.sender(), reply);
        } catch (const Error& e) {
          LOG(WARNING) << "could not ask node " << meta.sender() << " to register: " << e.what();
        }
      }
      return;
    }
    if (meta.command() == proto::HEARTBEAT && meta.sender() > 0 && meta.sender() < next_id_) {
      // A node that left the view (it was silent too long) hears so.
      Message reply = Control(proto::HEARTBEAT);
      reply.meta.set_error("node " + std::to_string(meta.sender()) +
                           " left the cluster (silent for more than " +
                           std::to_string(options_.heartbeat_timeout_s) + " s)");
      SendTo(meta.sender(), reply);
      return;
    }
    LOG(WARNING) << "ignored " << Describe(meta) << ": the sender is not a member";
    return;
  }
  member->second.last_heartbeat = MonotonicSeconds();
  if (member->second.reported_silent) {
    member->second.reported_silent = false;
    LOG(INFO) << "node " << meta.sender() << " is heard from again";
  }
  switch (meta.command()) {
    case proto::HEARTBEAT: {
      if (meta.has_cursor() && member->second.info.role() == proto::WORKER) {
        proto::WorkerCursor& progress = progress_[member->second.info.rank()];
        // An end-of-share report (ORPHANS) is newer than any heartbeat of that epoch.
        if (meta.cursor().epoch() > progress.epoch() || !progress.epoch_done()) {
          progress = meta.cursor();
        }
      }
      Message ack = Control(proto::HEARTBEAT);
      SendTo(meta.sender(), ack);
      break;
    }
    case proto::VIEW:
      if (published_) {
        Message reply = Control(proto::VIEW);
        *reply.meta.mutable_view() = view_;
        SendTo(meta.sender(), reply);
      }
      break;
    case proto::BARRIER:
      OnBarrier(meta);
      break;
    case proto::WORKER_DONE:
      OnWorkerDone(meta);
      break;
    case proto::CHECKPOINT:
      OnCheckpoint(meta);
      break;
    case proto::ORPHANS:
      OnOrphans(meta);
      break;
    case proto::REPLICA_SYNC:
      // A server that joined a chain holds the range now: it counts as a replica.
      if (member->second.info.role() == proto::SERVER) {
        copying_[meta.shard().range()].erase(member->second.info.rank());
      }
      break;
    case proto::SNAPSHOT:
      if (member->second.info.role() == proto::SERVER) {
        checkpoints_->OnServer(meta.sender(), meta);
        changed_.notify_all();
      }
      break;
    default:
      LOG(WARNING) << "ignored " << Describe(meta) << ": not a scheduler command";
  }
}

void Scheduler::Refuse(const Message& request, const std::string& reason) {
  LOG(WARNING) << "refused registration from " << request.meta.node().address() << ": " << reason;
  Message reply = Control(proto::REGISTER);
  reply.meta.set_epoch(view_.epoch());
  reply.meta.set_error(reason);
  van_.Reply(request, reply);
}

void Scheduler::OnRegister(const Message& request) {
  std::string host;
  int port = 0;
  try {
    std::tie(host, port) = ParseHostPort(request.meta.node().address(), "node address");
  } catch (const Error& e) {
    Refuse(request, e.what());
    return;
  }
  probes_.emplace_back([this, request, host = host, port = port] {
    const std::string& address = request.meta.node().address();
    const std::string why = ProbeAddress(address, options_.connect_timeout_s);
    std::string self = options_.bind_host;
    if (!why.empty()) {
      try {
        self = LocalAddressToward(host, port);
      } catch (const Error&) {
        // No route: the bind address is the best name for this end.
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    if (why.empty()) {
      Admit(request);
      return;
    }
    std::string reason = "node at " + address + " (seen from " + self + ":" +
                         std::to_string(van_.port()) + ") is unreachable: " + why;
    if (!request.peer_host.empty()) {
      reason += "; its registration came from " + request.peer_host;
    }
    reason += "; give it an --advertise address the scheduler can reach";
    Refuse(request, reason);
  });
}

void Scheduler::Admit(const Message& request) {
  const proto::NodeInfo& node = request.meta.node();
  std::set<int>* taken = node.role() == proto::SERVER   ? &server_ranks_
                         : node.role() == proto::WORKER ? &worker_ranks_
                                                        : nullptr;
  if (!taken) {
    Refuse(request, "role " + std::to_string(node.role()) + " cannot join a cluster");
    return;
  }
  const int expected = node.role() == proto::SERVER ? options_.num_servers : options_.num_workers;
  const std::string role = proto::Role_Name(node.role());
  if (node.rank() >= 0 && node.rank() < expected && taken->count(node.rank())) {
    // Perhaps held by a worker that has died but is not yet found silent: the
    // node asks again.
    Refuse(request, role + " rank " + std::to_string(node.rank()) + " is taken");
    return;
  }
  if (static_cast<int>(taken->size()) >= expected) {
    Refuse(request, "the cluster already has its " + std::to_string(expected) + " " + role + "(s)");
    return;
  }
  // A node of an earlier run of this scheduler keeps its id (servers key
  // their dedupe windows and clocks by it) and its rank.
  const bool rejoin = node.id() > 0;
  if (rejoin && (members_.count(node.id()) || removed_ids_.count(node.id()))) {
    Refuse(request, "node id " + std::to_string(node.id()) + " is in use or left the cluster");
    return;
  }
  // A node may ask for a rank (--rank); otherwise it gets the lowest free one.
  int rank = node.rank();
  if (rank >= expected) {
    Refuse(request, role + " rank " + std::to_string(rank) + " is outside 0.." +
                        std::to_string(expected - 1));
    return;
  }
  if (rank >= 0 && taken->count(rank)) {
    Refuse(request, role + " rank " + std::to_string(rank) + " is taken");
    return;
  }
  if (rank < 0) {
    rank = 0;
    while (taken->count(rank)) ++rank;
  }
  taken->insert(rank);
  // A worker taking over the rank of one that left resumes where its last
  // progress report left off.
  bool takeover = false;
  proto::WorkerCursor resume;
  if (node.role() == proto::WORKER) {
    auto vacancy = vacant_.find(rank);
    if (vacancy != vacant_.end()) {
      takeover = true;
      resume = vacancy->second.cursor;
      resume.set_rank(rank);
      LOG(INFO) << "worker " << rank << " is replaced after "
                << MonotonicSeconds() - vacancy->second.since << " s; it resumes at epoch "
                << resume.epoch() << " after " << resume.batches() << " minibatch(es)"
                << (resume.epoch_done() ? " (its share of that epoch is done)" : "");
    }
  }
  Member member;
  member.info.set_role(node.role());
  member.info.set_id(rejoin ? node.id() : next_id_++);
  if (rejoin) {
    next_id_ = std::max(next_id_, node.id() + 1);
    // The next view must be newer than the one the nodes have.
    view_.set_epoch(std::max<uint64_t>(view_.epoch(), request.meta.epoch()));
    // Its key ranges too: backups may have been promoted since the start.
    const proto::ClusterView& known = request.meta.known_view();
    if (known.epoch() > ranges_epoch_ && known.ranges_size() > 0) {
      try {
        ranges_ = RangeMap::FromProto(known.ranges());
        ranges_epoch_ = known.epoch();
      } catch (const Error& e) {
        LOG(WARNING) << "ignored the key ranges node " << node.id() << " knows: " << e.what();
      }
    }
  }
  member.info.set_rank(rank);
  member.info.set_address(node.address());
  member.last_heartbeat = MonotonicSeconds();
  const int id = member.info.id();
  try {
    van_.Connect(id, node.address());
  } catch (const Error& e) {
    taken->erase(rank);
    Refuse(request, e.what());
    return;
  }
  members_[id] = member;
  if (takeover) vacant_.erase(rank);
  LOG(INFO) << (rejoin ? "registered again " : "registered ") << proto::Role_Name(node.role())
            << " " << member.info.rank() << " as node " << id << " at " << node.address();

  Message reply = Control(proto::REGISTER);
  *reply.meta.mutable_node() = member.info;
  if (takeover) *reply.meta.mutable_cursor() = resume;
  // A server taking a departed one's rank. A scheduler started again knows
  // the chains (from the nodes' views) but not who left before it started:
  // once the job has chains, a server that registers anew replaces one too.
  const bool server_returns = node.role() == proto::SERVER && !rejoin &&
                              (server_vacant_.count(rank) > 0 || ranges_epoch_ > 0);
  membership_.Record("join", member.info,
                     std::string("\"rejoin\": ") + (rejoin ? "true" : "false") +
                         ", \"replaces\": " + (takeover || server_returns ? "true" : "false"));
  if (server_returns) ReplaceServer(rank, &reply);
  SendTo(id, reply);
  if (published_ || (static_cast<int>(server_ranks_.size()) == options_.num_servers &&
                     static_cast<int>(worker_ranks_.size()) == options_.num_workers)) {
    PublishView();
  }
}

void Scheduler::PublishView() {
  view_.set_epoch(view_.epoch() + 1);
  published_ = true;
  view_.set_num_servers(options_.num_servers);
  view_.set_num_workers(options_.num_workers);
  view_.clear_nodes();
  for (const auto& [id, member] : members_) *view_.add_nodes() = member.info;
  if (ranges_epoch_ == 0) ranges_ = RangeMap::Even(options_.num_servers, options_.replication);
  RepairChains();  // (a no-op but after a scheduler restart that missed a replacement)
  ranges_epoch_ = view_.epoch();
  ranges_.ToProto(view_.mutable_ranges());
  for (int range = 0; range < view_.ranges_size(); ++range) {
    for (int rank : copying_[range]) {
      if (ranges_.Holds(range, rank)) view_.mutable_ranges(range)->add_copying(rank);
    }
  }
  view_.set_replication(options_.replication);
  membership_.RecordView(view_);
  checkpoints_->FillView(&view_);
  LOG(INFO) << "cluster view epoch " << view_.epoch() << ": " << options_.num_servers
            << " server(s), " << options_.num_workers << " worker(s)";
  for (const auto& [id, member] : members_) {
    Message message = Control(proto::VIEW);
    *message.meta.mutable_view() = view_;
    SendTo(id, message);
  }
}

void Scheduler::OnBarrier(const proto::Meta& meta) {
  const int group = meta.barrier_group();
  if (group == 0 || (group & ~kAllGroup) != 0) {
    LOG(WARNING) << "ignored a barrier with group mask " << group << " from node " << meta.sender();
    return;
  }
  const std::string& tag = meta.barrier_tag();
  if (!tag.empty() && released_tags_[group].count(tag)) {
    // The group passed this point before this node joined: it goes on.
    Message release = Control(proto::BARRIER);
    release.meta.set_barrier_group(group);
    release.meta.set_barrier_id(meta.barrier_id());
    SendTo(meta.sender(), release);
    return;
  }
  barriers_[group][meta.sender()] = {meta.barrier_id(), tag};
  TryReleaseBarrier(group);
}

void Scheduler::TryReleaseBarrier(int group) {
  auto& waiting = barriers_[group];
  size_t members_in_group = 0;
  for (const auto& [id, member] : members_) {
    if (group & RoleBit(member.info.role())) ++members_in_group;
  }
  if (waiting.empty() || waiting.size() < members_in_group) return;
  const std::string tag = waiting.begin()->second.second;
  for (const auto& [id, barrier] : waiting) {
    if (barrier.second != tag) {
      LOG(WARNING) << "barrier of group " << group << ": node " << id << " waits at '"
                   << barrier.second << "', others at '" << tag << "'";
      return;
    }
  }
  for (const auto& [id, barrier] : waiting) {
    Message release = Control(proto::BARRIER);
    release.meta.set_barrier_group(group);
    release.meta.set_barrier_id(barrier.first);
    SendTo(id, release);
  }
  if (!tag.empty()) released_tags_[group].insert(tag);
  waiting.clear();
}

void Scheduler::RemoveWorker(int id, const std::string& reason) {
  const Member member = members_[id];
  LOG(WARNING) << "worker " << member.info.rank() << " (node " << id << " at "
               << member.info.address() << ") leaves the cluster: " << reason;
  membership_.Record("leave", member.info, "\"reason\": " + JsonQuote(reason));
  members_.erase(id);
  removed_ids_.insert(id);
  const int rank = member.info.rank();
  worker_ranks_.erase(rank);
  done_.erase(id);
  Vacancy& vacancy = vacant_[rank];
  vacancy.since = MonotonicSeconds();
  vacancy.reason = reason;
  auto progress = progress_.find(rank);
  if (progress != progress_.end()) vacancy.cursor = progress->second;
  for (const auto& [epoch, work] : epochs_) {
    // Its share of a later epoch than its last report: not started.
    if (epoch > vacancy.cursor.epoch() && !work.done.count(rank)) {
      vacancy.cursor = proto::WorkerCursor();
      vacancy.cursor.set_epoch(epoch);
    }
  }
  LOG(WARNING) << "worker " << rank << " waits " << options_.worker_replace_timeout_s
               << " s for a replacement (--rank " << rank << "); it was at epoch "
               << vacancy.cursor.epoch() << ", minibatch " << vacancy.cursor.batches();
  for (auto& [group, waiting] : barriers_) {
    waiting.erase(id);
    TryReleaseBarrier(group);
  }
  checkpoints_->OnMembership(Live(proto::WORKER), Live(proto::SERVER), options_.num_servers);
  for (auto& [epoch, work] : epochs_) {
    work.waiting.erase(id);
  }
  PublishView();
  changed_.notify_all();
}

void Scheduler::OnOrphans(const proto::Meta& meta) {
  const Member& member = members_[meta.sender()];
  if (member.info.role() != proto::WORKER) return;
  const proto::WorkerCursor& cursor = meta.cursor();
  const int epoch = cursor.epoch();
  EpochWork& work = epochs_[epoch];
  if (meta.orphan_done()) {
    auto handed = work.orphans.find(cursor.rank());
    if (handed == work.orphans.end() || meta.orphan_part() < 0 ||
        meta.orphan_part() >= handed->second.first) {
      LOG(WARNING) << "ignored ORPHANS from node " << meta.sender() << ": epoch " << epoch
                   << " has no part " << meta.orphan_part() << " of worker " << cursor.rank()
                   << "'s share handed out";
      return;
    }
    auto& [parts, finished] = handed->second;
    finished.insert(meta.orphan_part());
    work.part_examples[{cursor.rank(), meta.orphan_part()}] = cursor.examples();
    if (static_cast<int>(finished.size()) >= parts) {
      work.done.insert(cursor.rank());
      LOG(INFO) << "epoch " << epoch << ": the rest of worker " << cursor.rank()
                << "'s share has been read by " << parts << " other worker(s)";
    }
  } else {
    work.done.insert(member.info.rank());
    work.examples[member.info.rank()] = cursor.examples();
    proto::WorkerCursor& progress = progress_[member.info.rank()];
    progress = cursor;
    progress.set_rank(member.info.rank());
    progress.set_epoch_done(true);
  }
  work.waiting[meta.sender()] = meta.sequence();
  TryOrphans(epoch);
}

void Scheduler::TryOrphans(int epoch) {
  EpochWork& work = epochs_[epoch];
  if (work.waiting.empty()) return;
  bool all_done = true;
  const double now = MonotonicSeconds();
  for (int rank = 0; rank < options_.num_workers; ++rank) {
    if (work.done.count(rank)) continue;
    all_done = false;
    auto vacancy = vacant_.find(rank);
    if (vacancy == vacant_.end() || work.orphans.count(rank) ||
        now - vacancy->second.since < options_.worker_replace_timeout_s) {
      continue;  // working, being read by others, or waiting for a replacement
    }
    // Hand the rest of the share to the workers waiting here, a part each.
    proto::WorkerCursor from = vacancy->second.cursor;
    if (from.epoch() != epoch) {
      from = proto::WorkerCursor();
      from.set_epoch(epoch);
    }
    from.set_rank(rank);
    const int parts = static_cast<int>(work.waiting.size());
    work.orphans[rank] = {parts, {}};
    LOG(WARNING) << "epoch " << epoch << ": worker " << rank << " was not replaced within "
                 << options_.worker_replace_timeout_s << " s; " << parts
                 << " worker(s) read the rest of its share from minibatch " << from.batches();
    int part = 0;
    for (const auto& [node, sequence] : work.waiting) {
      Message reply = Control(proto::ORPHANS);
      reply.meta.set_sequence(sequence);
      *reply.meta.mutable_cursor() = from;
      reply.meta.set_orphan_part(part++);
      reply.meta.set_orphan_parts(parts);
      SendTo(node, reply);
    }
    work.waiting.clear();
    // A replacement that comes later finds this epoch's share taken.
    vacancy->second.cursor = from;
    vacancy->second.cursor.set_epoch_done(true);
    return;
  }
  if (!all_done) return;
  uint64_t examples = 0;
  for (const auto& [rank, count] : work.examples) {
    // A share handed over in parts is counted by its parts.
    if (!work.orphans.count(rank)) examples += count;
  }
  for (const auto& [part, count] : work.part_examples) examples += count;
  for (const auto& [node, sequence] : work.waiting) {
    Message reply = Control(proto::ORPHANS);
    reply.meta.set_sequence(sequence);
    reply.meta.set_epoch_examples(examples);
    SendTo(node, reply);
  }
  work.waiting.clear();
}

void Scheduler::RemoveServer(int id, const std::string& reason) {
  const Member member = members_[id];
  const int rank = member.info.rank();
  members_.erase(id);
  removed_ids_.insert(id);
  server_ranks_.erase(rank);
  server_vacant_[rank] = MonotonicSeconds();
  // Each chain closes over the gap. A range with no other replica that has
  // its rows (others may still be waiting for their copy) keeps the departed
  // rank alone as its primary, to wait for a replacement.
  std::string moved, alone, promoted_json, alone_json;
  for (size_t range = 0; range < ranges_.num_ranges(); ++range) {
    std::vector<int> chain = ranges_.Chain(range);
    auto it = std::find(chain.begin(), chain.end(), rank);
    if (it == chain.end()) continue;
    const bool primary = it == chain.begin();
    chain.erase(it);
    std::set<int>& copying = copying_[range];
    copying.erase(rank);
    const bool held =
        std::any_of(chain.begin(), chain.end(), [&](int other) { return !copying.count(other); });
    if (!held) {
      alone_json += (alone_json.empty() ? "" : ", ") + std::to_string(range);
      alone += (alone.empty() ? "" : ", ") + std::to_string(range);
      ranges_ = ranges_.WithChain(range, {rank});
      copying.clear();
      continue;
    }
    ranges_ = ranges_.WithChain(range, chain);
    if (primary) {
      moved += (moved.empty() ? "" : "; ") + std::string("key range ") + std::to_string(range) +
               ": backup server " + std::to_string(chain[0]) + " is promoted to primary";
      promoted_json += (promoted_json.empty() ? "" : ", ") + std::string("{\"range\": ") +
                       std::to_string(range) + ", \"primary\": " + std::to_string(chain[0]) + "}";
    }
  }
  membership_.Record("leave", member.info,
                     "\"reason\": " + JsonQuote(reason) + ", \"promoted\": [" + promoted_json +
                         "], \"ranges_without_replica\": [" + alone_json + "]");
  LOG(WARNING) << "server " << rank << " (node " << id << " at " << member.info.address()
               << ") leaves the cluster: " << reason << (moved.empty() ? "" : "; " + moved)
               << (alone.empty()
                       ? "; no acknowledged update is lost (its ranges have live replicas)"
                       : "; requests for key range(s) " + alone +
                             ", which no other replica holds, wait for a server "
                             "started again with --rank " +
                             std::to_string(rank));
  for (auto& [group, waiting] : barriers_) {
    waiting.erase(id);
    TryReleaseBarrier(group);
  }
  checkpoints_->OnMembership(Live(proto::WORKER), Live(proto::SERVER), options_.num_servers);
  PublishView();
  changed_.notify_all();
}

std::map<int, std::vector<std::pair<size_t, int>>> Scheduler::RepairChains() {
  std::map<int, std::vector<std::pair<size_t, int>>> added;
  if (ranges_.num_ranges() == 0) return added;
  const RangeMap start = RangeMap::Even(options_.num_servers, options_.replication);
  for (size_t range = 0; range < ranges_.num_ranges() && range < start.num_ranges(); ++range) {
    std::vector<int> chain = ranges_.Chain(range);
    if (!server_ranks_.count(chain[0])) continue;  // nobody joins behind a departed primary
    for (int member : start.Chain(range)) {
      if (std::find(chain.begin(), chain.end(), member) != chain.end() ||
          !server_ranks_.count(member)) {
        continue;
      }
      added[member].emplace_back(range, chain.back());
      chain.push_back(member);
      copying_[range].insert(member);
    }
    ranges_ = ranges_.WithChain(range, chain);
  }
  return added;
}

void Scheduler::ReplaceServer(int rank, Message* reply) {
  auto vacant = server_vacant_.find(rank);
  std::string what = "server " + std::to_string(rank) + " is replaced";
  if (vacant != server_vacant_.end()) {
    what += " after " + std::to_string(MonotonicSeconds() - vacant->second) + " s";
    server_vacant_.erase(vacant);
  } else {
    what += " (it left before this scheduler started)";
  }
  reply->meta.set_replaces(true);
  // Ranges the rank holds alone come from the latest checkpoint, and it is
  // their primary again; every other range it started in takes it back at the
  // end of its chain once its primary is live (the promoted primaries stay).
  std::string alone, copied, waiting;
  const RangeMap start = RangeMap::Even(options_.num_servers, options_.replication);
  for (size_t range = 0; range < ranges_.num_ranges(); ++range) {
    if (ranges_.Chain(range) == std::vector<int>{rank}) {
      alone += (alone.empty() ? "" : ", ") + std::to_string(range);
    }
  }
  auto added = RepairChains();
  for (const auto& [range, predecessor] : added[rank]) {
    copied += (copied.empty() ? "" : ", ") + std::to_string(range) + " (from server " +
              std::to_string(predecessor) + ")";
  }
  for (size_t range = 0; range < ranges_.num_ranges() && range < start.num_ranges(); ++range) {
    if (start.Holds(range, rank) && !ranges_.Holds(range, rank)) {
      waiting += (waiting.empty() ? "" : ", ") + std::to_string(range);
    }
  }
  if (!copied.empty()) what += "; it copies key range(s) " + copied + " from live replicas";
  if (!waiting.empty()) {
    what += "; key range(s) " + waiting + " wait for their primary's replacement first";
  }
  if (alone.empty()) {
    LOG(INFO) << what << (waiting.empty() ? "; nothing was lost" : "");
    return;
  }
  std::string uri;
  const std::string latest = checkpoints_->LatestCommitted(&uri);
  if (!latest.empty()) {
    reply->meta.set_checkpoint_uri(uri);
    reply->meta.set_checkpoint(latest);
    LOG(WARNING) << what << "; it restores key range(s) " << alone << " from checkpoint " << latest
                 << ": updates to them since that checkpoint are lost";
  } else {
    LOG(WARNING) << what << "; no checkpoint to restore key range(s) " << alone
                 << " from (--checkpoint_uri): they start over from their initial values";
  }
}

void Scheduler::OnWorkerDone(const proto::Meta& meta) {
  if (members_[meta.sender()].info.role() != proto::WORKER) {
    LOG(WARNING) << "ignored WORKER_DONE from node " << meta.sender() << ": not a worker";
    return;
  }
  done_[meta.sender()] = meta.error();
  LOG(INFO) << "worker " << members_[meta.sender()].info.rank() << " done"
            << (meta.error().empty() ? "" : ": " + meta.error());
  changed_.notify_all();
}

void Scheduler::MonitorLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    changed_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
    const double now = MonotonicSeconds();
    std::vector<std::pair<int, double>> silent_workers;
    for (auto& [id, member] : members_) {
      if (done_.count(id) || member.reported_silent) continue;
      const double silence = now - member.last_heartbeat;
      if (silence <= options_.heartbeat_timeout_s) continue;
      if (published_) {
        silent_workers.emplace_back(id, silence);
      } else {
        member.reported_silent = true;
        LOG(WARNING) << proto::Role_Name(member.info.role()) << " " << member.info.rank()
                     << " (node " << id << " at " << member.info.address() << ") silent for "
                     << silence << " s";
      }
    }
    for (const auto& [id, silence] : silent_workers) {
      const std::string reason = "no heartbeat for " + std::to_string(silence) + " s";
      if (members_[id].info.role() == proto::SERVER) {
        RemoveServer(id, reason);
      } else {
        RemoveWorker(id, reason);
      }
    }
    // Replacement timeouts expire with time.
    for (auto& [epoch, work] : epochs_) {
      if (!work.waiting.empty()) TryOrphans(epoch);
    }
    changed_.notify_all();
  }
}

}  // namespace keel
