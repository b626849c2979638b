#include "kv/node.h"

#include <glog/logging.h>

#include <algorithm>
#include <iterator>

#include "kv/error.h"

namespace keel {
namespace {

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Message Control(proto::Command command) {
  Message message;
  message.meta.set_command(command);
  return message;
}

}  // namespace

double MonotonicSeconds() { return static_cast<double>(NowNanos()) * 1e-9; }

Node::Node(NodeOptions options) : options_(std::move(options)) {}

Node::~Node() { Stop(); }

const std::string& Node::address() const { return van_->address(); }

void Node::Start() {
  const auto [scheduler_host, scheduler_port] =
      ParseHostPort(options_.scheduler, "scheduler address (--scheduler)");
  VanOptions van_options;
  van_options.bind_host = options_.bind_host;
  van_options.port = options_.port;
  van_options.advertise_host = options_.advertise_host;
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

  Message request = Control(proto::REGISTER);
  request.meta.mutable_node()->set_role(options_.role);
  request.meta.mutable_node()->set_address(van_->address());
  request.meta.mutable_node()->set_rank(options_.rank);
  SendToScheduler(request);

  // The answer comes to this node's address; a refusal comes back on the
  // connection the request went out on (the address may be the problem).
  const double deadline = MonotonicSeconds() + options_.register_timeout_s;
  std::unique_lock<std::mutex> lock(mutex_);
  auto registered = [this] { return !refused_.empty() || (id_ >= 0 && view_ != nullptr); };
  while (!registered() && MonotonicSeconds() < deadline) {
    changed_.wait_for(lock, std::chrono::milliseconds(50), registered);
    lock.unlock();
    Message reply;
    while (van_->TakeReply(kSchedulerId, &reply)) OnMessage(std::move(reply));
    lock.lock();
  }
  if (!refused_.empty()) {
    throw MakeError("the scheduler at ", options_.scheduler, " refused this ",
                    proto::Role_Name(options_.role), ": ", refused_);
  }
  if (!registered()) {
    throw MakeError("no answer from the scheduler at ", options_.scheduler, " within ",
                    options_.register_timeout_s, " s (this node listens at ", van_->address(),
                    "; is the scheduler running and reachable, and can it reach this address?)");
  }
  lock.unlock();
  last_scheduler_contact_ns_ = NowNanos();
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
  LOG(INFO) << proto::Role_Name(options_.role) << " " << rank_ << " (node " << id_
            << ") listening at " << van_->address() << ", view epoch " << epoch_;
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

void Node::Barrier(int group, double timeout_s) {
  uint64_t barrier_id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    barrier_id = ++next_barrier_;
  }
  Message request = Control(proto::BARRIER);
  request.meta.set_barrier_group(group);
  request.meta.set_barrier_id(barrier_id);
  SendToScheduler(request);
  std::unique_lock<std::mutex> lock(mutex_);
  if (!changed_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                         [&] { return barriers_released_.count(barrier_id) > 0 || stopped_; })) {
    throw MakeError("barrier ", barrier_id, " (group ", group, ") not released within ", timeout_s,
                    " s");
  }
  barriers_released_.erase(barrier_id);
}

void Node::ReportDone(const std::string& error) {
  Message report = Control(proto::WORKER_DONE);
  report.meta.set_error(error);
  SendToScheduler(report);
}

bool Node::WaitForShutdown(double timeout_s) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] {
    return shutdown_.load() || stopped_.load();
  }) && shutdown_;
}

double Node::SecondsSinceScheduler() const {
  return static_cast<double>(NowNanos() - last_scheduler_contact_ns_.load()) * 1e-9;
}

uint64_t Node::malformed_messages() const { return van_ ? van_->malformed_messages() : 0; }

void Node::OnMessage(Message&& message) {
  const proto::Meta& meta = message.meta;
  const bool control = meta.command() >= proto::REGISTER && meta.command() <= proto::SHUTDOWN;
  static_assert(proto::SHUTDOWN < proto::PUSH, "control commands come before data commands");
  if (!control) {  // data, or unknown: the data handler answers it
    if (meta.epoch() > epoch_) {
      // The sender knows a newer view (perhaps one naming the sender itself):
      // hold the message until this node has that view too.
      std::lock_guard<std::mutex> lock(mutex_);
      if (held_.empty()) {
        Message ask = Control(proto::VIEW);
        SendToScheduler(ask);
      }
      held_.push_back(std::move(message));
      return;
    }
    if (data_handler_) data_handler_(std::move(message));
    return;
  }
  if (meta.sender() != kSchedulerId) {
    rejected_control_.fetch_add(1);
    LOG(WARNING) << "ignored " << Describe(meta) << ": control messages come from the scheduler";
    return;
  }
  last_scheduler_contact_ns_ = NowNanos();
  switch (meta.command()) {
    case proto::REGISTER: {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!meta.error().empty()) {
        refused_ = meta.error();
      } else {
        rank_ = meta.node().rank();
        id_ = meta.node().id();
      }
      break;
    }
    case proto::VIEW: {
      OnView(meta.view());
      if (auto current = view(); current && view_handler_) view_handler_(*current);
      std::vector<Message> ready;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        auto current = epoch_.load();
        auto it = std::stable_partition(held_.begin(), held_.end(), [current](const Message& m) {
          return m.meta.epoch() <= current;
        });
        ready.assign(std::make_move_iterator(held_.begin()), std::make_move_iterator(it));
        held_.erase(held_.begin(), it);
      }
      for (Message& held : ready) {
        if (data_handler_) data_handler_(std::move(held));
      }
      break;
    }
    case proto::BARRIER: {
      std::lock_guard<std::mutex> lock(mutex_);
      barriers_released_[meta.barrier_id()] = true;
      break;
    }
    case proto::HEARTBEAT:
      break;
    case proto::SHUTDOWN: {
      std::lock_guard<std::mutex> lock(mutex_);  // no lost wake-up
      shutdown_ = true;
      break;
    }
    default:
      LOG(WARNING) << "ignored unexpected " << Describe(meta);
      return;
  }
  changed_.notify_all();
}

void Node::OnView(const proto::ClusterView& view) {
  std::shared_ptr<const RangeMap> ranges;
  try {
    ranges = std::make_shared<RangeMap>(RangeMap::FromProto(view.ranges()));
  } catch (const Error& e) {
    LOG(ERROR) << "ignored a malformed view (epoch " << view.epoch() << "): " << e.what();
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (view_ && view.epoch() <= view_->epoch()) return;
  view_ = std::make_shared<proto::ClusterView>(view);
  ranges_ = std::move(ranges);
  epoch_ = view.epoch();
}

void Node::HeartbeatLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopped_) {
    changed_.wait_for(lock, std::chrono::duration<double>(options_.heartbeat_interval_s),
                      [this] { return stopped_.load(); });
    if (stopped_) break;
    lock.unlock();
    Message beat = Control(proto::HEARTBEAT);
    try {
      SendToScheduler(beat);
    } catch (const Error& e) {
      LOG(WARNING) << "heartbeat not sent: " << e.what();
    }
    lock.lock();
  }
}

}  // namespace keel
