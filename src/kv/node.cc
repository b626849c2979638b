#include "kv/node.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <random>

#include "base/error.h"
#include "base/time.h"
#include "kv/view_delta.h"

namespace keel {
namespace {

// A random number for a REGISTER, never 0 (which no answer may match).
uint64_t RegisterNonce() {
  std::random_device device;
  const uint64_t nonce = (static_cast<uint64_t>(device()) << 32) | device();
  return nonce == 0 ? 1 : nonce;
}

bool IsPowerOfTwo(uint64_t count) { return count != 0 && (count & (count - 1)) == 0; }

size_t FrameBytes(const Message& message) {
  size_t bytes = 0;
  for (const Bytes& frame : message.frames) bytes += frame.bytes();
  return bytes;
}

}  // namespace

Node::Node(NodeOptions options) : options_(std::move(options)) {}

Node::~Node() { Stop(); }

const std::string& Node::address() const { return van_->address(); }

const std::string& Node::routing_id() const { return van_->routing_id(); }

void Node::Start() {
  StartVan();
  Register();
  last_scheduler_contact_ns_ = MonotonicNanos();
  last_heartbeat_round_ns_.store(MonotonicNanos());
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
  LOG(INFO) << proto::Role_Name(options_.role) << " " << rank_ << " (node " << id_
            << ") listening at " << van_->address() << ", view epoch " << epoch_;
}

void Node::StartVan() {
  const auto [scheduler_host, scheduler_port] =
      ParseHostPort(options_.scheduler, "scheduler address (--scheduler)");
  VanOptions van_options;
  van_options.bind_host = options_.bind_host;
  van_options.port = options_.port;
  van_options.advertise_host = options_.advertise_host;
  van_options.faults = options_.faults;
  van_options.secret = options_.secret;
  if (van_options.advertise_host.empty()) {
    van_options.advertise_host = options_.bind_host == "0.0.0.0"
                                     ? LocalAddressToward(scheduler_host, scheduler_port)
                                     : options_.bind_host;
  }
  van_ = std::make_unique<Van>(van_options);
  LOG(INFO) << proto::Role_Name(options_.role) << " listening on " << options_.bind_host << ":"
            << van_->port() << ", advertising " << van_->address() << " to the scheduler at "
            << options_.scheduler;
  van_->Connect(kSchedulerId, options_.scheduler);
  van_->Start([this](Message&& message) { OnMessage(std::move(message)); });
}

void Node::Register() {
  // A rank still held by a node the scheduler has not yet found silent is
  // "taken": a replacement asks again until the rank is free.
  const double deadline = MonotonicSeconds() + options_.register_timeout_s;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    refused_.clear();
    lock.unlock();
    SendRegister();
    lock.lock();
    // Asked again after a while: a scheduler killed and restarted loses the
    // REGISTER it had (the scheduler answers a repeat as the first).
    AwaitRegistration(lock, std::min(deadline, MonotonicSeconds() + kRegisterResendS));
    // "try again": the scheduler had too many registrations waiting.
    const bool taken = refused_.find("is taken") != std::string::npos ||
                       refused_.find("try again") != std::string::npos;
    if (taken && MonotonicSeconds() + 1 < deadline) {
      changed_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stopped_.load(); });
      continue;
    }
    if (!refused_.empty()) {
      throw MakeError("the scheduler at ", options_.scheduler, " refused this ",
                      proto::Role_Name(options_.role), ": ", refused_);
    }
    if (!RegistrationAnsweredLocked() && MonotonicSeconds() < deadline && !stopped_) continue;
    if (!RegistrationAnsweredLocked() && id_ >= 0 && !stopped_) {
      // Admitted, but the first view never came: the scheduler publishes it
      // once every expected member has registered.
      throw MakeError("the scheduler at ", options_.scheduler, " admitted this ",
                      proto::Role_Name(options_.role), " (rank ", rank_.load(),
                      ") but the cluster did not form within ", options_.register_timeout_s,
                      " s: members it waits for have not registered, or it stopped (its log "
                      "says how many registered; did a server or worker fail to start?)");
    }
    if (!RegistrationAnsweredLocked()) {
      throw MakeError("no answer from the scheduler at ", options_.scheduler, " within ",
                      options_.register_timeout_s, " s (this node listens at ", van_->address(),
                      "; is the scheduler running and reachable, and can it reach this address?)");
    }
    return;
  }
}

uint64_t Node::NewRegisterNonceLocked() {
  if (register_nonces_.size() == kRegisterNonces) register_nonces_.pop_front();
  register_nonces_.push_back(RegisterNonce());
  return register_nonces_.back();
}

void Node::SendRegister() {
  Message request = CommandMessage(proto::REGISTER);
  request.meta.MergeFrom(options_.register_fields);
  request.meta.mutable_node()->set_role(options_.role);
  request.meta.mutable_node()->set_address(van_->address());
  request.meta.mutable_node()->set_rank(options_.rank);
  request.meta.mutable_node()->set_routing_id(van_->routing_id());
  request.meta.set_join(options_.join);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    request.meta.set_sequence(NewRegisterNonceLocked());
  }
  SendToScheduler(request);
}

void Node::AwaitRegistration(std::unique_lock<std::mutex>& lock, double deadline) {
  // The answer comes to this node's address; a refusal comes back on the
  // connection the request went out on (the address may be the problem).
  auto answered = [this] { return RegistrationAnsweredLocked(); };
  while (!answered() && MonotonicSeconds() < deadline) {
    changed_.wait_for(lock, std::chrono::milliseconds(50), answered);
    lock.unlock();
    Message reply;
    while (van_->TakeReply(kSchedulerId, &reply)) OnMessage(std::move(reply));
    lock.lock();
  }
}

bool Node::RegistrationAnsweredLocked() const {
  return !refused_.empty() || (id_ >= 0 && view_ != nullptr);
}

void Node::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);  // no lost wake-up
    if (stopped_.exchange(true)) return;
  }
  changed_.notify_all();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  if (van_) van_->Stop();
}

std::shared_ptr<const proto::ClusterView> Node::view() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return view_;
}

std::shared_ptr<const RangeMap> Node::ranges() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ranges_;
}

int Node::ServerId(int server_rank) const {
  auto current = view();
  if (current) {
    for (const auto& node : current->nodes()) {
      if (node.role() == proto::SERVER && node.rank() == server_rank) return node.id();
    }
  }
  throw MakeError("server ", server_rank, " is not in the cluster view");
}

void Node::Send(int node_id, Message& message) {
  message.meta.set_sender(id_);
  message.meta.set_epoch(epoch_);
  if (!van_->IsConnected(node_id)) {
    auto current = view();
    std::string address;
    if (current) {
      for (const auto& node : current->nodes()) {
        if (node.id() == node_id) address = node.address();
      }
    }
    if (address.empty()) throw MakeError("node ", node_id, " is not in the cluster view");
    van_->Connect(node_id, address);
  }
  van_->Send(node_id, message);
}

void Node::SendToScheduler(Message& message) {
  message.meta.set_sender(id_);
  message.meta.set_epoch(epoch_);
  van_->Send(kSchedulerId, message);
}

void Node::Barrier(int group, double timeout_s, const std::string& tag) {
  uint64_t barrier_id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    barrier_id = ++next_barrier_;
  }
  Message request = CommandMessage(proto::BARRIER);
  request.meta.set_barrier_group(group);
  request.meta.set_barrier_id(barrier_id);
  request.meta.set_barrier_tag(tag);
  SendAwaited("barrier " + std::to_string(barrier_id), request);
  std::unique_lock<std::mutex> lock(mutex_);
  const bool answered = changed_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] {
    return barriers_released_.count(barrier_id) > 0 || stopped_ || removed_ || shutdown_;
  });
  awaiting_.erase("barrier " + std::to_string(barrier_id));
  if (!answered) {
    throw MakeError("barrier ", barrier_id, " (group ", group, ") not released within ", timeout_s,
                    " s");
  }
  if (shutdown_ && !barriers_released_.count(barrier_id)) {
    throw MakeError("barrier ", barrier_id, ": the scheduler ended the job");
  }
  if (removed_ && !barriers_released_.count(barrier_id)) {
    throw MakeError("barrier ", barrier_id, ": this node left the cluster");
  }
  barriers_released_.erase(barrier_id);
}

proto::Meta Node::registration() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return registration_;
}

void Node::SetHeartbeatFields(std::function<void(proto::Meta*)> fill) {
  std::lock_guard<std::mutex> lock(mutex_);
  heartbeat_fields_ = std::move(fill);
}

void Node::SetRejoinFields(std::function<void(proto::Meta*)> rejoin,
                           std::function<std::vector<proto::Meta>()> resend) {
  std::lock_guard<std::mutex> lock(mutex_);
  rejoin_fields_ = std::move(rejoin);
  rejoin_resend_ = std::move(resend);
}

Node::ControlAnswer Node::Request(Message& request, const std::string& name, double timeout_s) {
  SendAwaited(name, request, /*waited=*/true);
  std::unique_lock<std::mutex> lock(mutex_);
  const bool ended = changed_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] {
    return answers_.count(name) > 0 || stopped_ || removed_ || shutdown_;
  });
  awaiting_.erase(name);
  ControlAnswer result;
  if (auto answer = answers_.find(name); answer != answers_.end()) {
    result.answered = true;
    result.meta = std::move(answer->second);
    answers_.erase(answer);
  }
  if (!ended) {
    result.outcome = ControlOutcome::kTimedOut;
  } else if (stopped_) {
    result.outcome = ControlOutcome::kStopped;
  } else if (!result.answered) {
    result.outcome = shutdown_ ? ControlOutcome::kShutdown : ControlOutcome::kRemoved;
  } else {
    result.outcome = ControlOutcome::kAnswered;
  }
  return result;
}

void Node::Post(Message& request, const std::string& name) { SendAwaited(name, request); }

void Node::SendAwaited(const std::string& key, Message& request, bool waited) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    awaiting_[key] = Awaited{request.meta, MonotonicSeconds() + options_.heartbeat_interval_s,
                             options_.heartbeat_interval_s, waited};
    answer_commands_.insert(request.meta.command());
  }
  request.sent_until_answered = true;
  SendToScheduler(request);
}

bool Node::Answered(const std::string& key) { return awaiting_.erase(key) > 0; }

void Node::TakeAnswerLocked(const proto::Meta& answer) {
  for (auto awaited = awaiting_.begin(); awaited != awaiting_.end(); ++awaited) {
    const proto::Meta& request = awaited->second.meta;
    if (request.command() != answer.command() || request.sequence() != answer.sequence()) {
      continue;
    }
    if (awaited->second.waited) answers_[awaited->first] = answer;
    awaiting_.erase(awaited);
    return;
  }
}

void Node::ResendOverdueLocked(double now) {
  if (rejoining_) return;  // sent again once registered with the new scheduler
  for (auto& [key, awaited] : awaiting_) {
    if (awaited.next_send > now) continue;
    awaited.wait =
        std::min(2 * awaited.wait, kControlResendMaxHeartbeats * options_.heartbeat_interval_s);
    awaited.next_send = now + awaited.wait;
    VLOG(1) << "sending " << key << " to the scheduler again";
    SendAgainLocked(awaited.meta, /*until_answered=*/true);
  }
}

void Node::SendAgainLocked(const proto::Meta& request, bool until_answered) {
  Message again;
  again.meta = request;
  again.sent_until_answered = until_answered;
  again.meta.set_sender(id_);
  again.meta.set_epoch(epoch_);
  try {
    van_->Send(kSchedulerId, again);
  } catch (const Error& e) {
    LOG(WARNING) << "not sent again to the scheduler: " << e.what();
  }
}

void Node::Rejoin() {
  Message request = CommandMessage(proto::REGISTER);
  bool again = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const double now = MonotonicSeconds();
    if (rejoining_ && now - rejoin_sent_ < kRegisterResendS) return;
    again = rejoining_;
    rejoining_ = true;
    rejoin_sent_ = now;
    request.meta.set_sequence(NewRegisterNonceLocked());
  }
  request.meta.mutable_node()->set_role(options_.role);
  request.meta.mutable_node()->set_address(van_->address());
  request.meta.mutable_node()->set_rank(rank_);
  request.meta.mutable_node()->set_id(id_);
  request.meta.mutable_node()->set_routing_id(van_->routing_id());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    FillRejoinLocked(&request.meta);
  }
  LOG(WARNING) << "the scheduler was restarted: registering again as node " << id_
               << (again ? " (its previous REGISTER went unanswered)" : "");
  SendToScheduler(request);
}

void Node::FillRejoinLocked(proto::Meta* request) const {
  // Key ranges may have moved (promotions): the restarted scheduler takes them from here.
  if (view_) *request->mutable_known_view() = *view_;
  for (const proto::PassedBarrier& passed : passed_barriers_) {
    *request->add_passed_barriers() = passed;
  }
  if (rejoin_fields_) rejoin_fields_(request);
}

void Node::RememberAnswerLocked(const std::string& key) {
  const auto awaited = awaiting_.find(key);
  if (awaited == awaiting_.end()) return;
  const proto::Meta& request = awaited->second.meta;
  if (request.command() == proto::BARRIER && !request.barrier_tag().empty()) {
    proto::PassedBarrier passed;
    passed.set_group(request.barrier_group());
    passed.set_tag(request.barrier_tag());
    passed_barriers_.push_back(passed);
    if (passed_barriers_.size() > static_cast<size_t>(kMaxPassedBarriers)) {
      passed_barriers_.erase(passed_barriers_.begin());
    }
  }
}

void Node::RequestPreemption() {
  Message request = CommandMessage(proto::PREEMPT);
  SendAwaited("preempt", request);  // sent again until answered (ResendOverdueLocked)
}

bool Node::preempted(std::string* checkpoint, std::string* uri) const {
  std::lock_guard<std::mutex> lock(mutex_);
  *checkpoint = preempted_checkpoint_;
  *uri = preempted_uri_;
  return preempted_;
}

bool Node::WaitForShutdown(double timeout_s) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] {
    return shutdown_.load() || stopped_.load();
  }) && shutdown_;
}

double NextHeartbeatDelay(double wall_now_s, double interval_s) {
  double delay = interval_s - std::fmod(wall_now_s, interval_s);
  if (delay < 0.25 * interval_s) delay += interval_s;
  return delay;
}

int HeartbeatRelayRank(int worker_rank, int num_servers) {
  return num_servers > 0 && worker_rank >= 0 ? worker_rank % num_servers : -1;
}

double Node::SecondsSinceScheduler() const {
  return static_cast<double>(MonotonicNanos() - last_scheduler_contact_ns_.load()) * 1e-9;
}

double Node::SecondsSinceHeartbeatRound() const {
  const int64_t last = last_heartbeat_round_ns_.load();
  return last == 0 ? 0 : static_cast<double>(MonotonicNanos() - last) * 1e-9;
}

size_t Node::held_messages() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_.size();
}

size_t Node::awaited_requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return awaiting_.size();
}

uint64_t Node::malformed_messages() const { return van_ ? van_->malformed_messages() : 0; }

TransportFaultCounts Node::transport_fault_counts() const {
  return van_ ? van_->fault_counts() : TransportFaultCounts{};
}

void Node::OnMessage(Message&& message) {
  const proto::Meta& meta = message.meta;
  const bool control = (meta.command() >= proto::REGISTER && meta.command() < proto::PUSH) ||
                       meta.command() == proto::PREEMPT;
  static_assert(proto::SNAPSHOT < proto::PUSH, "control commands come before data commands");
  if (!control) {  // data, or unknown: the data handler answers it
    OnData(std::move(message));
    return;
  }
  if (meta.command() == proto::HEARTBEAT && meta.sender() != kSchedulerId &&
      options_.role == proto::SERVER) {
    TakeRelayed(message);  // a worker's, to pass on
    return;
  }
  if (meta.command() == proto::HEARTBEAT && meta.sender() != kSchedulerId &&
      options_.role == proto::WORKER) {
    // Its relay server took a heartbeat to pass on.
    if (meta.sender() == RelayServerId() && OnSendersConnection(message)) {
      relay_unanswered_ = 0;
      // The server's word from the scheduler is this worker's too.
      const int64_t heard_ns =
          MonotonicNanos() - static_cast<int64_t>(meta.scheduler_contact_age_ms()) * 1000000;
      int64_t known_ns = last_scheduler_contact_ns_.load();
      while (heard_ns > known_ns &&
             !last_scheduler_contact_ns_.compare_exchange_weak(known_ns, heard_ns)) {
      }
      if (std::find(meta.beat_direct().begin(), meta.beat_direct().end(), id_) !=
          meta.beat_direct().end()) {
        beat_direct_next_ = true;
      }
    } else {
      Reject(&rejected_control_, meta, "a heartbeat answer from a server that is not its relay");
    }
    return;
  }
  if (!FromScheduler(message)) {
    Reject(&rejected_control_, meta,
           "control messages come from the scheduler's connection only (this came from " +
               (message.peer_host.empty() ? std::string("an unknown host") : message.peer_host) +
               ")");
    return;
  }
  last_scheduler_contact_ns_ = MonotonicNanos();
  switch (meta.command()) {
    case proto::REGISTER:
      OnRegisterAnswer(meta);
      break;
    case proto::VIEW:
      if (meta.has_view_delta()) {
        if (!OnViewDelta(meta.view_delta())) break;
      } else {
        OnView(meta.view());
      }
      CallViewHandler();
      ReleaseHeld();
      break;
    case proto::BARRIER: {
      std::lock_guard<std::mutex> lock(mutex_);
      RememberAnswerLocked("barrier " + std::to_string(meta.barrier_id()));
      if (Answered("barrier " + std::to_string(meta.barrier_id()))) {
        barriers_released_[meta.barrier_id()] = true;
      }
      break;
    }
    case proto::HEARTBEAT:
      OnHeartbeatAnswer(meta, message.route.empty());
      break;
    case proto::SHUTDOWN: {
      std::lock_guard<std::mutex> lock(mutex_);  // no lost wake-up
      if (meta.preempt()) {
        preempted_ = true;
        preempted_checkpoint_ = meta.checkpoint();
        preempted_uri_ = meta.checkpoint_uri();
      }
      shutdown_ = true;
      break;
    }
    case proto::PREEMPT: {
      std::lock_guard<std::mutex> lock(mutex_);
      preempting_ = true;
      Answered("preempt");
      break;
    }
    default: {
      std::unique_lock<std::mutex> lock(mutex_);
      if (answer_commands_.count(meta.command()) > 0) {
        TakeAnswerLocked(meta);
        break;
      }
      lock.unlock();
      if (control_handler_) {
        control_handler_(std::move(message));
      } else {
        LOG(WARNING) << "ignored unexpected " << Describe(meta);
      }
      return;
    }
  }
  changed_.notify_all();
}

bool Node::FromScheduler(const Message& message) {
  const proto::Meta& meta = message.meta;
  if (meta.sender() != kSchedulerId) return false;
  if (message.route.empty()) return true;  // on this node's own connection to the scheduler
  std::lock_guard<std::mutex> lock(mutex_);
  if (!scheduler_route_.empty() && message.route == scheduler_route_) return true;
  // The answer to this node's latest REGISTER: its connection is the scheduler's.
  if (meta.command() == proto::REGISTER && meta.sequence() != 0 &&
      std::find(register_nonces_.begin(), register_nonces_.end(), meta.sequence()) !=
          register_nonces_.end()) {
    scheduler_route_ = message.route;
    return true;
  }
  return false;
}

void Node::Reject(std::atomic<uint64_t>* counter, const proto::Meta& meta, const std::string& why) {
  const uint64_t count = counter->fetch_add(1) + 1;
  if (IsPowerOfTwo(count)) {
    LOG(WARNING) << "ignored " << Describe(meta) << ": " << why << " (" << count
                 << " ignored so far)";
  }
}

void Node::OnData(Message&& message) {
  if (message.meta.epoch() > epoch_) {
    // The sender knows a newer view (perhaps one naming the sender itself):
    // hold the message until this node has that view too.
    Hold(std::move(message));
    return;
  }
  Deliver(std::move(message));
}

bool Node::Hold(Message&& message) {
  const int sender = message.meta.sender();
  const size_t bytes = FrameBytes(message);
  std::string why;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto from_sender = held_per_sender_.find(sender);
    if (message.meta.epoch() - epoch_ > kMaxEpochsAhead) {
      why = "its view epoch is more than " + std::to_string(kMaxEpochsAhead) +
            " ahead of this node's (" + std::to_string(epoch_) + ")";
    } else if (from_sender != held_per_sender_.end() && from_sender->second >= kMaxHeldPerSender) {
      why = std::to_string(kMaxHeldPerSender) + " messages from node " + std::to_string(sender) +
            " already wait for a newer view";
    } else if (held_.size() >= kMaxHeldMessages || held_bytes_ + bytes > kMaxHeldBytes) {
      why = "the queue of messages waiting for a newer view is full (" +
            std::to_string(held_.size()) + " messages, " + std::to_string(held_bytes_) + " bytes)";
    } else {
      first = held_.empty();
      ++held_per_sender_[sender];
      held_bytes_ += bytes;
      held_.push_back(std::move(message));
    }
  }
  if (!why.empty()) {
    Reject(&rejected_data_, message.meta, why);
    return false;
  }
  if (first) {
    Message ask = CommandMessage(proto::VIEW);
    SendToScheduler(ask);
  }
  return true;
}

void Node::Deliver(Message&& message) {
  if (!OnSendersConnection(message)) {
    misrouted_data_.fetch_add(1);
    Reject(&rejected_data_, message.meta,
           "it did not come on node " + std::to_string(message.meta.sender()) +
               "'s connection (this came from " +
               (message.peer_host.empty() ? std::string("an unknown host") : message.peer_host) +
               ")");
    return;
  }
  if (data_handler_) data_handler_(std::move(message));
}

bool Node::OnSendersConnection(const Message& message) {
  const int sender = message.meta.sender();
  if (message.route.empty()) return false;  // a reply on this node's own connection
  std::lock_guard<std::mutex> lock(mutex_);
  auto checked = checked_routes_.find(sender);
  if (checked != checked_routes_.end()) return checked->second == message.route;
  if (!view_) return false;
  for (const auto& node : view_->nodes()) {
    if (node.id() != sender) continue;
    if (node.route_digest().empty() || RouteDigest(message.route) != node.route_digest()) {
      return false;
    }
    checked_routes_[sender] = message.route;
    return true;
  }
  return false;
}

void Node::TakeRelayed(const Message& message) {
  const proto::Meta& meta = message.meta;
  if (!OnSendersConnection(message)) {
    Reject(&rejected_control_, meta,
           "a heartbeat to pass on must come from a worker of the view on its own connection");
    return;
  }
  if (FrameBytes(message) > kMaxRelayedBytes) {
    Reject(&rejected_control_, meta,
           "a heartbeat to pass on has at most " + std::to_string(kMaxRelayedBytes) + " bytes");
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  const bool relays_for_it =
      view_ && view_->heartbeat_relay() &&
      std::any_of(view_->nodes().begin(), view_->nodes().end(), [&](const proto::NodeInfo& node) {
        return node.id() == meta.sender() && node.role() == proto::WORKER &&
               HeartbeatRelayRank(node.rank(), view_->num_servers()) == rank_;
      });
  if (!relays_for_it) {
    Reject(&rejected_control_, meta, "this server does not pass on that node's heartbeats");
    return;
  }
  auto& [beat, at_ns] = relayed_[meta.sender()];
  beat.Clear();
  beat.set_node(meta.sender());
  if (meta.has_cursor()) *beat.mutable_cursor() = meta.cursor();
  beat.set_reading_seconds(meta.reading_seconds());
  if (meta.has_progress()) *beat.mutable_progress() = meta.progress();
  at_ns = MonotonicNanos();
  const bool beat_direct = beat_direct_asked_.erase(meta.sender()) > 0;
  lock.unlock();
  Message taken = CommandMessage(proto::HEARTBEAT);  // taken: the worker goes on relaying
  taken.meta.set_scheduler_contact_age_ms(static_cast<uint32_t>(std::min(
      SecondsSinceScheduler() * 1e3, static_cast<double>(std::numeric_limits<uint32_t>::max()))));
  if (beat_direct) taken.meta.add_beat_direct(meta.sender());
  try {
    Send(meta.sender(), taken);
  } catch (const Error&) {
    // It left the view meanwhile.
  }
}

int Node::RelayServerId() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!view_ || !view_->heartbeat_relay()) return -1;
  const int relay_rank = HeartbeatRelayRank(rank_, view_->num_servers());
  for (const proto::NodeInfo& node : view_->nodes()) {
    if (node.role() == proto::SERVER && node.rank() == relay_rank) return node.id();
  }
  return -1;
}

void Node::OnRegisterAnswer(const proto::Meta& meta) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!meta.error().empty() && rejoining_ && meta.replaced()) {
    rejoining_ = false;
    if (!removed_.exchange(true)) {
      LOG(ERROR) << "the scheduler no longer counts this node: " << meta.error();
    }
  } else if (!meta.error().empty() && rejoining_) {
    rejoining_ = false;  // asked again at the next heartbeat
    LOG(WARNING) << "the restarted scheduler refused this node: " << meta.error();
  } else if (!meta.error().empty()) {
    refused_ = meta.error();
  } else if (rejoining_) {
    // Registered with a restarted scheduler: what it never answered goes
    // again, and what the protocols over this node tell it again.
    rejoining_ = false;
    ResendAwaitedLocked();
    if (rejoin_resend_) {
      for (const proto::Meta& request : rejoin_resend_()) {
        SendAgainLocked(request, /*until_answered=*/false);
      }
    }
  } else {
    rank_ = meta.node().rank();
    id_ = meta.node().id();
    registration_ = meta;
  }
}

void Node::ResendAwaitedLocked() {
  for (const auto& [key, awaited] : awaiting_) {
    SendAgainLocked(awaited.meta, /*until_answered=*/true);
  }
}

void Node::CallViewHandler() {
  if (auto current = view(); current && view_handler_) view_handler_(*current);
}

void Node::ReleaseHeld() {
  std::vector<Message> ready;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto current = epoch_.load();
    auto it = std::stable_partition(held_.begin(), held_.end(), [current](const Message& m) {
      return m.meta.epoch() <= current;
    });
    ready.assign(std::make_move_iterator(held_.begin()), std::make_move_iterator(it));
    held_.erase(held_.begin(), it);
    for (const Message& released : ready) {
      held_bytes_ -= FrameBytes(released);
      auto from_sender = held_per_sender_.find(released.meta.sender());
      if (--from_sender->second == 0) held_per_sender_.erase(from_sender);
    }
  }
  for (Message& held : ready) Deliver(std::move(held));
}

void Node::OnHeartbeatAnswer(const proto::Meta& meta, bool own_connection) {
  if (meta.beat_direct_size() > 0 && options_.role == proto::SERVER) {
    // Workers of this server's the scheduler does not count: each hears so
    // with its next relayed heartbeat (at most the view's workers are kept).
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t bound = view_ ? static_cast<size_t>(view_->num_workers()) : 0;
    for (const int id : meta.beat_direct()) {
      if (beat_direct_asked_.size() >= bound) break;
      beat_direct_asked_.insert(id);
    }
  }
  if (meta.rejoin() && id_ >= 0) {
    if (!own_connection) {
      Reject(&rejected_control_, meta,
             "a request to register again comes on this node's connection to the scheduler");
      return;
    }
    Rejoin();
    return;
  }
  if (!meta.error().empty()) {
    std::lock_guard<std::mutex> lock(mutex_);  // no lost wake-up
    if (!removed_.exchange(true)) {
      LOG(ERROR) << "the scheduler no longer counts this node: " << meta.error();
    }
  }
}

void Node::TakeSchedulerReplies() {
  Message reply;
  while (van_->TakeReply(kSchedulerId, &reply)) OnMessage(std::move(reply));
}

void Node::OnView(const proto::ClusterView& received) {
  auto view = std::make_shared<proto::ClusterView>(received);
  FillEvenBegins(view.get());
  std::shared_ptr<const RangeMap> ranges;
  try {
    ranges = std::make_shared<RangeMap>(RangeMap::FromProto(view->ranges()));
  } catch (const Error& e) {
    LOG(ERROR) << "ignored a malformed view (epoch " << view->epoch() << "): " << e.what();
    return;
  }
  std::set<int> members{kSchedulerId};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (view_ && view->epoch() <= view_->epoch()) return;
    epoch_ = view->epoch();
    for (const proto::NodeInfo& node : view->nodes()) members.insert(node.id());
    // A worker named to go to the scheduler that left the view is told no more.
    for (auto it = beat_direct_asked_.begin(); it != beat_direct_asked_.end();) {
      it = members.count(*it) ? std::next(it) : beat_direct_asked_.erase(it);
    }
    view_ = std::move(view);
    ranges_ = std::move(ranges);
    checked_routes_.clear();  // checked again against the new view's digests
  }
  // The connections to nodes that left the view close (each is a descriptor
  // and a socket that keeps dialling a dead address; a long job with many
  // replacements ran out of neither before this, but grew without bound).
  van_->DisconnectAllBut(members);
}

bool Node::OnViewDelta(const proto::ViewDelta& delta) {
  std::shared_ptr<const proto::ClusterView> held;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    held = view_;
  }
  if (held && delta.fields().epoch() <= held->epoch()) return false;  // old news
  proto::ClusterView next;
  if (!held || !ApplyViewDelta(*held, delta, &next)) {
    LOG(INFO) << "the view of epoch " << delta.fields().epoch() << " came as a change from epoch "
              << delta.base_epoch() << ", and this node holds "
              << (held ? "epoch " + std::to_string(held->epoch()) : std::string("none"))
              << ": asking for the whole view";
    Message ask = CommandMessage(proto::VIEW);
    SendToScheduler(ask);
    return false;
  }
  OnView(next);
  return true;
}

void Node::HeartbeatLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopped_) {
    const double delay = NextHeartbeatDelay(WallSeconds(), options_.heartbeat_interval_s);
    changed_.wait_for(lock, std::chrono::duration<double>(delay),
                      [this] { return stopped_.load(); });
    if (stopped_) break;
    lock.unlock();
    Message beat = CommandMessage(proto::HEARTBEAT);
    beat.sent_until_answered = true;  // one a heartbeat interval
    {
      std::lock_guard<std::mutex> fields_lock(mutex_);
      if (heartbeat_fields_) heartbeat_fields_(&beat.meta);
      // A server passes on the workers' heartbeats it took since its last
      // (up to kMaxRelayedBytesPerBeat; the rest with its next).
      const int64_t now_ns = MonotonicNanos();
      size_t bytes = 0;
      for (auto taken = relayed_.begin();
           taken != relayed_.end() && bytes < kMaxRelayedBytesPerBeat;) {
        taken->second.first.set_age_ms(
            static_cast<uint32_t>((now_ns - taken->second.second) / 1000000));
        bytes += taken->second.first.ByteSizeLong();
        *beat.meta.add_relayed() = std::move(taken->second.first);
        taken = relayed_.erase(taken);
      }
    }
    // A worker's goes to its relay server (heartbeat_relay), one in
    // relay_direct_every to the scheduler: worker r's when its beats number r
    // mod that, so that as many go to the scheduler at each beat.
    // One over kMaxRelayedBytes, after kRelayUnansweredMax relayed ones its
    // server did not answer, or the next after its server said so
    // (Meta.beat_direct), goes to the scheduler too.
    int relay = -1;
    const int relay_server = options_.role == proto::WORKER && !beat_direct_ ? RelayServerId() : -1;
    const bool direct_next = beat_direct_next_.exchange(false);
    if (relay_server >= 0 && !direct_next &&
        (++beats_ + std::max(0, rank_.load())) % std::max(1, options_.relay_direct_every) != 0 &&
        beat.meta.ByteSizeLong() <= kMaxRelayedBytes / 2) {
      if (relay_unanswered_ < kRelayUnansweredMax) {
        relay = relay_server;
      } else {
        relay_unanswered_ = 0;  // the relay is tried again at the next
      }
    }
    const double answer_after = (relay_server >= 0 ? kRelayingAnswerAfter : kHeartbeatAnswerAfter) *
                                options_.heartbeat_interval_s;
    if (relay < 0 && SecondsSinceScheduler() >= answer_after) {
      beat.meta.set_ack(true);  // answer it: nothing else came for a while
    }
    // Who this is, for a restarted scheduler that asks it to register again.
    beat.meta.mutable_node()->set_role(options_.role);
    beat.meta.mutable_node()->set_address(van_->address());
    try {
      if (relay >= 0) {
        try {
          ++relay_unanswered_;
          Send(relay, beat);
        } catch (const Error&) {
          SendToScheduler(beat);  // its server left meanwhile
        }
      } else {
        SendToScheduler(beat);
      }
    } catch (const Error& e) {
      LOG(WARNING) << "heartbeat not sent: " << e.what();
    }
    TakeSchedulerReplies();
    last_heartbeat_round_ns_.store(MonotonicNanos());
    lock.lock();
    ResendOverdueLocked(MonotonicSeconds());
  }
}

}  // namespace keel
