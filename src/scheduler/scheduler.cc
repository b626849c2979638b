#include "scheduler/scheduler.h"

#include <glog/logging.h>

#include <tuple>

#include "kv/error.h"
#include "kv/keys.h"
#include "kv/node.h"

namespace keel {
namespace {

VanOptions SchedulerVan(const SchedulerOptions& options) {
  if (options.num_servers <= 0 || options.num_workers <= 0) {
    throw MakeError("a cluster needs at least one server and one worker (--num_servers ",
                    options.num_servers, ", --num_workers ", options.num_workers, ")");
  }
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
    : options_(options), van_(SchedulerVan(options)) {}

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
  std::vector<std::thread> probes;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    probes.swap(probes_);
  }
  for (auto& probe : probes) probe.join();
  van_.Stop();
}

proto::ClusterView Scheduler::view() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return view_;
}

int Scheduler::WaitForJob(double timeout_s) {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool done = changed_.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] {
    return static_cast<int>(done_.size()) >= options_.num_workers;
  });
  if (!done) return -1;
  int failed = 0;
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
  LOG(INFO) << "job finished: " << options_.num_workers - failed << " of " << options_.num_workers
            << " worker(s) succeeded";
  return failed;
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
      Message ack = Control(proto::HEARTBEAT);
      SendTo(meta.sender(), ack);
      break;
    }
    case proto::VIEW:
      if (view_.epoch() > 0) {
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
  if (static_cast<int>(taken->size()) >= expected) {
    Refuse(request, "the cluster already has its " + std::to_string(expected) + " " + role + "(s)");
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
  Member member;
  member.info.set_role(node.role());
  member.info.set_id(next_id_++);
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
  LOG(INFO) << "registered " << proto::Role_Name(node.role()) << " " << member.info.rank()
            << " as node " << id << " at " << node.address();

  Message reply = Control(proto::REGISTER);
  *reply.meta.mutable_node() = member.info;
  SendTo(id, reply);
  if (static_cast<int>(server_ranks_.size()) == options_.num_servers &&
      static_cast<int>(worker_ranks_.size()) == options_.num_workers) {
    PublishView();
  }
}

void Scheduler::PublishView() {
  view_.set_epoch(view_.epoch() + 1);
  view_.set_num_servers(options_.num_servers);
  view_.set_num_workers(options_.num_workers);
  view_.clear_nodes();
  for (const auto& [id, member] : members_) *view_.add_nodes() = member.info;
  RangeMap::Even(options_.num_servers).ToProto(view_.mutable_ranges());
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
  barriers_[group][meta.sender()] = meta.barrier_id();
  TryReleaseBarrier(group);
}

void Scheduler::TryReleaseBarrier(int group) {
  auto& waiting = barriers_[group];
  size_t members_in_group = 0;
  for (const auto& [id, member] : members_) {
    if (group & RoleBit(member.info.role())) ++members_in_group;
  }
  if (waiting.empty() || waiting.size() < members_in_group) return;
  for (const auto& [id, barrier_id] : waiting) {
    Message release = Control(proto::BARRIER);
    release.meta.set_barrier_group(group);
    release.meta.set_barrier_id(barrier_id);
    SendTo(id, release);
  }
  waiting.clear();
}

void Scheduler::RemoveWorker(int id, const std::string& reason) {
  const Member member = members_[id];
  LOG(WARNING) << "worker " << member.info.rank() << " (node " << id << " at "
               << member.info.address() << ") leaves the cluster: " << reason;
  members_.erase(id);
  worker_ranks_.erase(member.info.rank());
  done_[id] = "left the cluster: " + reason;
  for (auto& [group, waiting] : barriers_) {
    waiting.erase(id);
    TryReleaseBarrier(group);
  }
  PublishView();
  changed_.notify_all();
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
      if (member.info.role() == proto::WORKER && view_.epoch() > 0) {
        silent_workers.emplace_back(id, silence);
      } else {
        // Servers leaving the view need their ranges moved: not yet.
        member.reported_silent = true;
        LOG(WARNING) << proto::Role_Name(member.info.role()) << " " << member.info.rank()
                     << " (node " << id << " at " << member.info.address() << ") silent for "
                     << silence << " s";
      }
    }
    for (const auto& [id, silence] : silent_workers) {
      RemoveWorker(id, "no heartbeat for " + std::to_string(silence) + " s");
    }
  }
}

}  // namespace keel
