#include "kv/van.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iterator>
#include <sstream>
#include <vector>
#include <zmq_addon.hpp>

#include "base/error.h"
#include "base/time.h"
#include "kv/monitor_event.h"

namespace keel {
namespace {

// The receive thread checks for stop (and for replies other threads queued)
// at least this often: a process stops within about it.
constexpr int kReceivePollMs = 10;
// How long a closing send socket keeps trying to deliver queued messages.
constexpr int kLingerMs = 2000;
// ZeroMQ's I/O threads: the receiving socket's connections are served by the
// first (affinity bit 0), the sending sockets' by the second, so a large
// message going out does not hold up the acknowledgements coming in, nor the
// other way round (docs/BENCHMARKS.md, "KV push/pull against raw ZeroMQ").
constexpr int kIoThreads = 2;
constexpr uint64_t kReceiveAffinity = 1;
constexpr uint64_t kSendAffinity = 2;

std::string Endpoint(const std::string& host, int port) {
  return "tcp://" + host + ":" + (port == 0 ? std::string("*") : std::to_string(port));
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// Without a secret, anyone who reaches a port beyond loopback is a member.
void WarnIfOpenToTheNetwork(const VanOptions& options) {
  if (options.secret || IsLoopback(options.bind_host)) return;
  LOG(WARNING) << "*** INSECURE: listening on " << options.bind_host
               << " without a cluster secret: anyone who can reach this port can join the "
                  "cluster, read and change the model. Give every role --secret_file (made by "
                  "`keel keygen`; see README, Security). ***";
}

// A context for `options`' sockets (ZMQ_MAX_SOCKETS set before the first).
zmq::context_t MakeContext(const VanOptions& options) {
  zmq::context_t context(kIoThreads);
  if (options.max_sockets > 0 &&
      zmq_ctx_set(context.handle(), ZMQ_MAX_SOCKETS, options.max_sockets) != 0) {
    throw MakeError("cannot allow ", options.max_sockets,
                    " ZeroMQ sockets: ", zmq_strerror(zmq_errno()));
  }
  return context;
}

}  // namespace

std::string RandomRoutingId() {
  std::random_device device;
  std::string id(16, '\0');
  for (char& c : id) c = static_cast<char>(device());
  if (id[0] == 0) id[0] = 1;
  return id;
}

std::string RouteDigest(const std::string& routing_id) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(routing_id.data(), routing_id.size(), digest, &length, EVP_sha256(), nullptr) !=
      1) {
    throw MakeError("SHA-256 of a ", routing_id.size(), "-byte routing id failed in libcrypto");
  }
  return std::string(reinterpret_cast<const char*>(digest), length);
}

bool IsDataPlane(proto::Command command) {
  return command == proto::PUSH || command == proto::PULL || command == proto::DUMP ||
         command == proto::CLOCK;
}

void TransportFaults::Check() const {
  auto share = [](double value, const char* name) {
    if (!(value >= 0 && value <= 1)) throw MakeError(name, " ", value, " is not in [0, 1]");
  };
  share(drop_rate, "drop rate");
  share(delay_rate, "delay rate");
  if (!(delay_ms >= 0)) throw MakeError("delay ", delay_ms, " ms is negative");
  if (!(delay_jitter_ms >= 0)) throw MakeError("delay jitter ", delay_jitter_ms, " ms is negative");
}

std::pair<std::string, int> ParseHostPort(const std::string& address, const std::string& what) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    throw MakeError(what, " '", address, "' is not HOST:PORT");
  }
  const std::string port_text = address.substr(colon + 1);
  char* end = nullptr;
  const long port = std::strtol(port_text.c_str(), &end, 10);
  if (*end != '\0' || port <= 0 || port > 65535) {
    throw MakeError(what, " '", address, "': port '", port_text, "' is not in 1..65535");
  }
  return {address.substr(0, colon), static_cast<int>(port)};
}

std::string LocalAddressToward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) {
    throw MakeError("cannot resolve host '", host, "'");
  }
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  std::string local;
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in self{};
    socklen_t length = sizeof(self);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &length) == 0) {
      char text[INET_ADDRSTRLEN];
      if (inet_ntop(AF_INET, &self.sin_addr, text, sizeof(text))) local = text;
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (local.empty()) throw MakeError("no route from this machine to '", host, "'");
  return local;
}

namespace {

// ProbeNode without a secret.
AddressProbe ProbeTcp(const std::string& address, double timeout_s) {
  const auto [host, port] = ParseHostPort(address, "address");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) {
    return {"cannot resolve host '" + host + "'", false};
  }
  std::string why;
  int refusal = 0;  // errno of a failed connection
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    why = std::string("socket: ") + strerror(errno);
  } else if (connect(fd, found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS) {
    refusal = errno;
    why = strerror(errno);
  } else {
    pollfd waiting{fd, POLLOUT, 0};
    const int ready = poll(&waiting, 1, static_cast<int>(std::ceil(timeout_s * 1000)));
    int error = 0;
    socklen_t length = sizeof(error);
    if (ready == 0) {
      std::ostringstream text;
      text << "no answer within " << timeout_s << " s";
      why = text.str();
    } else if (ready < 0) {
      why = std::string("poll: ") + strerror(errno);
    } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
      refusal = error;
      why = strerror(error);
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  for (char& c : why) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return {why, refusal == ECONNREFUSED};
}

}  // namespace

std::string ProbeAddress(const std::string& address, double timeout_s) {
  return ProbeTcp(address, timeout_s).failure;
}

std::string ProbeAddress(const std::string& address, double timeout_s,
                         const std::optional<ClusterSecret>& secret) {
  return ProbeNode(address, timeout_s, secret).failure;
}

AddressProbe ProbeNode(const std::string& address, double timeout_s,
                       const std::optional<ClusterSecret>& secret) {
  if (!secret) return ProbeTcp(address, timeout_s);
  const auto [host, port] = ParseHostPort(address, "address");
  std::ostringstream within;
  within << timeout_s << " s";
  zmq::context_t context(1);
  zmq::socket_t probe(context, zmq::socket_type::dealer);
  probe.set(zmq::sockopt::linger, 0);
  probe.set(zmq::sockopt::curve_serverkey, secret->public_key);
  probe.set(zmq::sockopt::curve_publickey, secret->public_key);
  probe.set(zmq::sockopt::curve_secretkey, secret->secret_key);
  constexpr char kProbeMonitor[] = "inproc://keel-address-probe";
  const int events = ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_DISCONNECTED |
                     ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
  if (zmq_socket_monitor(probe.handle(), kProbeMonitor, events) != 0) {
    return {std::string("cannot watch the probe's handshake: ") + zmq_strerror(zmq_errno()), false};
  }
  zmq::socket_t monitor(context, zmq::socket_type::pair);
  monitor.set(zmq::sockopt::linger, 0);
  monitor.connect(kProbeMonitor);
  // Unwatched before `monitor` closes (ConnectionWatch::Unwatch says why).
  struct Unwatch {
    zmq::socket_t& socket;
    ~Unwatch() { ConnectionWatch::Unwatch(socket); }
  } unwatch{probe};
  try {
    probe.connect(Endpoint(host, port));
  } catch (const zmq::error_t& e) {
    return {std::string("cannot connect: ") + e.what(), false};
  }
  const double deadline = MonotonicSeconds() + timeout_s;
  bool connected = false, tcp_checked = false;
  while (true) {
    const double left = deadline - MonotonicSeconds();
    if (left <= 0) break;
    monitor.set(zmq::sockopt::rcvtimeo, std::max(1, static_cast<int>(std::ceil(left * 1000))));
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(monitor, std::back_inserter(frames))) break;
    const std::optional<MonitorEvent> event = ReadMonitorEvent(frames);
    if (!event) continue;
    const uint32_t value = event->value;
    switch (event->id) {
      case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        return {"", false};
      case ZMQ_EVENT_CONNECTED:
        connected = true;
        break;
      case ZMQ_EVENT_CONNECT_RETRIED:
        // The connection failed: a TCP connection says why (it reaches no
        // node, so it is refused by nobody). If that one gets through, the
        // node came up meanwhile and libzmq's next attempt is awaited.
        if (!tcp_checked) {
          tcp_checked = true;
          AddressProbe tcp = ProbeTcp(address, std::min(left, 1.0));
          if (!tcp.failure.empty()) return tcp;
        }
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        return {"it refused the cluster's key (CURVE status " + std::to_string(value) +
                    "): it holds another cluster secret",
                false};
      case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
          return {"it does not speak CURVE: it was started without the cluster secret", false};
        }
        return {"its CURVE handshake broke the protocol (ZMTP error " + std::to_string(value) +
                    "): it holds another cluster secret, or is not a node",
                false};
      case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      case ZMQ_EVENT_DISCONNECTED:
        if (connected) {
          return {
              "it closed the connection during the CURVE handshake: it runs without the "
              "cluster secret or with another one, or is not a node",
              false};
        }
        break;
      default:
        break;
    }
  }
  return {connected
              ? "it accepted a connection but completed no CURVE handshake within " + within.str()
              : "no answer within " + within.str(),
          false};
}

Van::Van(const VanOptions& options)
    : network_(options.memory_network),
      context_(MakeContext(options)),
      receiver_(context_, zmq::socket_type::router),
      secret_(options.secret),
      routing_id_(RandomRoutingId()),
      faults_(options.faults),
      fault_random_(options.faults.seed),
      track_caught_up_(options.track_caught_up) {
  faults_.Check();
  if (network_) {
    if (faults_.any() || secret_) {
      throw MakeError("an in-process transport takes no transport faults and no cluster secret");
    }
    address_ = network_->Bind(&inbox_, routing_id_);
    port_ = ParseHostPort(address_, "in-process address").second;
    return;
  }
  WarnIfOpenToTheNetwork(options);
  ConfigureCurveServer(options);
  ConfigureReceiver(options.max_frame_bytes);
  const std::string endpoint = Endpoint(options.bind_host, options.port);
  try {
    receiver_.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw MakeError("cannot listen on ", endpoint, ": ", e.what());
  }
  const std::string bound = receiver_.get(zmq::sockopt::last_endpoint);
  port_ = ParseHostPort(bound.substr(bound.find("//") + 2), "bound endpoint").second;
  std::string host = options.advertise_host.empty() ? options.bind_host : options.advertise_host;
  address_ = host + ":" + std::to_string(port_);
}

Van::~Van() { Stop(); }

void Van::ConfigureReceiver(int64_t max_frame_bytes) {
  receiver_.set(zmq::sockopt::affinity, kReceiveAffinity);
  receiver_.set(zmq::sockopt::rcvhwm, 0);
  receiver_.set(zmq::sockopt::rcvtimeo, kReceivePollMs);
  receiver_.set(zmq::sockopt::linger, 0);
  receiver_.set(zmq::sockopt::maxmsgsize, std::min(max_frame_bytes, kMaxFrameBytes));
  // A peer reconnecting with its routing id replaces its stale connection
  // (otherwise the ROUTER refuses the new one until it notices the old died).
  receiver_.set(zmq::sockopt::router_handover, true);
}

zmq::socket_t Van::MakeSendSocket() {
  zmq::socket_t socket(context_, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::affinity, kSendAffinity);
  socket.set(zmq::sockopt::sndhwm, 0);
  socket.set(zmq::sockopt::linger, kLingerMs);
  socket.set(zmq::sockopt::maxmsgsize, kMaxFrameBytes);
  socket.set(zmq::sockopt::routing_id, zmq::buffer(routing_id_));
  ConfigureCurveClient(socket);
  return socket;
}

void Van::ConfigureCurveServer(const VanOptions& options) {
  if (!secret_) return;
  RequireCurve();
  const std::string where =
      "node at " + options.bind_host + (options.port ? ":" + std::to_string(options.port) : "");
  authenticator_ =
      std::make_unique<PeerAuthenticator>(context_, receiver_, secret_->public_key, where);
  receiver_.set(zmq::sockopt::curve_server, true);
  receiver_.set(zmq::sockopt::curve_secretkey, secret_->secret_key);
  receiver_.set(zmq::sockopt::zap_domain, "keel");
  VLOG(0) << "CURVE on: connections are encrypted and only holders of the cluster secret may "
             "connect";
}

void Van::ConfigureCurveClient(zmq::socket_t& socket) const {
  if (!secret_) return;
  socket.set(zmq::sockopt::curve_serverkey, secret_->public_key);
  socket.set(zmq::sockopt::curve_publickey, secret_->public_key);
  socket.set(zmq::sockopt::curve_secretkey, secret_->secret_key);
}

void Van::Start(Handler handler) {
  handler_ = std::move(handler);
  receive_thread_ = std::thread([this] { network_ ? ReceiveFromMemory() : ReceiveLoop(); });
  if (faults_.delays()) delay_thread_ = std::thread([this] { DelayLoop(); });
  if (faults_.any()) {
    LOG(INFO) << "transport faults at " << address_ << ": drop " << faults_.drop_rate
              << " of data messages" << (faults_.control ? " and of resent control messages" : "")
              << "; delay " << faults_.delay_rate << " of them by " << faults_.delay_ms
              << " ms + up to " << faults_.delay_jitter_ms << " ms (seed " << faults_.seed << ")";
  }
}

void Van::Stop() {
  if (stopping_.exchange(true)) return;
  if (network_) network_->Unbind(address_);  // nothing arrives any more
  if (receive_thread_.joinable()) receive_thread_.join();
  {
    std::lock_guard<std::mutex> lock(faults_mutex_);
    delay_stopping_ = true;
  }
  delay_changed_.notify_all();
  if (delay_thread_.joinable()) delay_thread_.join();
  if (faults_.any()) {
    const TransportFaultCounts counts = fault_counts();
    LOG(INFO) << "transport faults: dropped " << counts.dropped << " and delayed " << counts.delayed
              << " of " << counts.data_messages << " outgoing data messages ("
              << counts.discarded_at_stop << " delayed ones discarded at stop)";
  }
  std::unique_ptr<ConnectionWatch> watch;
  {
    // Every socket unwatched before the watch closes its PAIRs
    // (ConnectionWatch::Unwatch), and none watched after.
    std::lock_guard<std::mutex> lock(peers_mutex_);
    for (auto& [id, peer] : peers_) {
      if (!peer || !peer->watch || network_) continue;
      std::lock_guard<std::mutex> peer_lock(peer->mutex);
      ConnectionWatch::Unwatch(peer->socket);
    }
    watch = std::move(watch_);
  }
  if (watch) watch->Stop();  // before the sockets close: that is no news
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    for (auto& [id, peer] : peers_) {
      if (peer) ClosePeerLocked(*peer);
    }
    peers_.clear();
  }
  receiver_.close();
  // After the receiving socket: no handshake may happen without the handler.
  if (authenticator_) authenticator_->Stop();
  context_.close();
}

void Van::Connect(int node_id, const std::string& address) {
  std::lock_guard<std::mutex> lock(peers_mutex_);
  auto existing = peers_.find(node_id);
  if (existing != peers_.end() && existing->second->address == address) return;
  auto fresh = std::make_shared<Peer>();
  fresh->address = address;
  if (network_) {
    if (closed_) {
      fresh->watch = network_->Watch(address, [closed = closed_, node_id] { closed(node_id); });
    }
    auto& peer = peers_[node_id];
    if (peer) ClosePeerLocked(*peer);
    peer = std::move(fresh);
    return;
  }
  fresh->socket = MakeSendSocket();
  if (watch_) fresh->watch = watch_->Watch(fresh->socket, node_id);
  try {
    fresh->socket.connect("tcp://" + address);
  } catch (const zmq::error_t& e) {
    ClosePeerLocked(*fresh);
    throw MakeError("cannot connect to node ", node_id, " at '", address, "': ", e.what());
  }
  auto& peer = peers_[node_id];
  if (peer) ClosePeerLocked(*peer);
  peer = std::move(fresh);
}

void Van::ClosePeerLocked(Peer& peer) {
  if (network_) {
    if (peer.watch) network_->Forget(peer.watch);
    return;
  }
  std::lock_guard<std::mutex> peer_lock(peer.mutex);
  if (peer.watch) ConnectionWatch::Unwatch(peer.socket);
  if (watch_ && peer.watch) watch_->Forget(peer.watch);
  peer.socket.close();
}

void Van::WatchConnections(ConnectionWatch::Closed closed) {
  std::lock_guard<std::mutex> lock(peers_mutex_);
  if (network_) {
    closed_ = std::move(closed);
    return;
  }
  watch_ = std::make_unique<ConnectionWatch>(context_, std::move(closed));
}

void Van::Disconnect(int node_id) {
  std::lock_guard<std::mutex> lock(peers_mutex_);
  auto it = peers_.find(node_id);
  if (it == peers_.end()) return;
  ClosePeerLocked(*it->second);
  peers_.erase(it);
}

void Van::DisconnectAllBut(const std::set<int>& keep) {
  std::lock_guard<std::mutex> lock(peers_mutex_);
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (keep.count(it->first)) {
      ++it;
      continue;
    }
    ClosePeerLocked(*it->second);
    it = peers_.erase(it);
  }
}

bool Van::IsConnected(int node_id) const {
  std::lock_guard<std::mutex> lock(peers_mutex_);
  return peers_.count(node_id) > 0;
}

void Van::Send(int node_id, const Message& message) {
  const proto::Command command = message.meta.command();
  const bool faultable = IsDataPlane(command) || (faults_.control && message.sent_until_answered);
  if (!faults_.any() || !faultable) {
    std::vector<zmq::message_t> frames = Encode(message);
    SendNow(node_id, frames);
    return;
  }
  if (!IsConnected(node_id)) throw MakeError("no connection to node ", node_id);
  double release = 0;
  {
    std::lock_guard<std::mutex> lock(faults_mutex_);
    ++fault_counts_.data_messages;
    std::uniform_real_distribution<double> uniform(0, 1);
    if (faults_.drops() && uniform(fault_random_) < faults_.drop_rate) {
      ++fault_counts_.dropped;
      VLOG(1) << "fault injection dropped " << Describe(message.meta) << " to node " << node_id;
      return;
    }
    double hold = 0;
    if (faults_.delays() && uniform(fault_random_) < faults_.delay_rate) {
      hold = (faults_.delay_ms + faults_.delay_jitter_ms * uniform(fault_random_)) * 1e-3;
      ++fault_counts_.delayed;
    }
    Link& link = links_[node_id];
    if (hold > 0 || link.queued > 0) {
      // Never overtake a message still held back on the same link.
      release = std::max(MonotonicSeconds() + hold, link.last_release);
      link.last_release = release;
      ++link.queued;
      delayed_.push(Delayed{release, next_delayed_order_++, node_id, Encode(message)});
    }
  }
  if (release > 0) {
    delay_changed_.notify_all();
    return;
  }
  std::vector<zmq::message_t> frames = Encode(message);
  SendNow(node_id, frames);
}

void Van::SendShared(int node_id, const std::vector<zmq::message_t>& frames) {
  std::vector<zmq::message_t> copies(frames.size());
  // A copy of a ZeroMQ message shares its buffer (reference-counted).
  for (size_t i = 0; i < frames.size(); ++i) copies[i].copy(const_cast<zmq::message_t&>(frames[i]));
  SendNow(node_id, copies);
}

void Van::SendNow(int node_id, std::vector<zmq::message_t>& frames) {
  std::shared_ptr<Peer> peer;
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    auto it = peers_.find(node_id);
    if (it == peers_.end()) throw MakeError("no connection to node ", node_id);
    peer = it->second;
  }
  if (network_) {
    network_->Send(routing_id_, peer->address, std::move(frames));  // lost if it left
    return;
  }
  std::lock_guard<std::mutex> lock(peer->mutex);
  if (!peer->socket) throw MakeError("connection to node ", node_id, " is closed");
  zmq::send_multipart(peer->socket, frames);
}

TransportFaultCounts Van::fault_counts() const {
  std::lock_guard<std::mutex> lock(faults_mutex_);
  return fault_counts_;
}

void Van::DelayLoop() {
  std::unique_lock<std::mutex> lock(faults_mutex_);
  while (!delay_stopping_) {
    if (delayed_.empty()) {
      delay_changed_.wait(lock);
      continue;
    }
    const double wait = delayed_.top().release - MonotonicSeconds();
    if (wait > 0) {
      delay_changed_.wait_for(lock, std::chrono::duration<double>(wait));
      continue;
    }
    // priority_queue::top is const: the frames are moved out before pop.
    Delayed due = std::move(const_cast<Delayed&>(delayed_.top()));
    delayed_.pop();
    lock.unlock();
    try {
      SendNow(due.node_id, due.frames);
    } catch (const std::exception& e) {
      LOG(WARNING) << "a delayed message to node " << due.node_id << " was lost: " << e.what();
    }
    lock.lock();
    --links_[due.node_id].queued;
  }
  fault_counts_.discarded_at_stop += delayed_.size();
  while (!delayed_.empty()) delayed_.pop();
}

void Van::Reply(const Message& received, const Message& answer) {
  std::vector<zmq::message_t> frames = Encode(answer);
  if (network_) {
    network_->Reply(received.route, std::move(frames));
    return;
  }
  std::lock_guard<std::mutex> lock(replies_mutex_);
  replies_.emplace_back(received.route, std::move(frames));
}

void Van::SendReplies() {
  std::vector<std::pair<std::string, std::vector<zmq::message_t>>> replies;
  {
    std::lock_guard<std::mutex> lock(replies_mutex_);
    replies.swap(replies_);
  }
  for (auto& [route, frames] : replies) {
    try {
      receiver_.send(zmq::buffer(route), zmq::send_flags::sndmore);
      zmq::send_multipart(receiver_, frames);
    } catch (const zmq::error_t& e) {
      LOG(WARNING) << "reply not sent: " << e.what();
    }
  }
}

bool Van::TakeReply(int node_id, Message* reply) {
  std::shared_ptr<Peer> peer;
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    auto it = peers_.find(node_id);
    if (it == peers_.end()) return false;
    peer = it->second;
  }
  std::vector<zmq::message_t> frames;
  if (network_) {
    // Answers come on one queue, whoever sent them (a node's only come from
    // the scheduler).
    if (!inbox_.TakeReply(&frames)) return false;
  } else {
    std::lock_guard<std::mutex> lock(peer->mutex);
    if (!peer->socket) return false;
    if (!zmq::recv_multipart(peer->socket, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
      return false;
    }
  }
  try {
    *reply = Decode(std::move(frames));
  } catch (const Error& e) {
    malformed_.fetch_add(1);
    LOG(WARNING) << "dropped a malformed reply: " << e.what();
    return false;
  }
  return true;
}

void Van::ReceiveLoop() {
  std::vector<zmq::message_t> frames;
  while (!stopping_.load(std::memory_order_relaxed)) {
    SendReplies();
    frames.clear();
    zmq::recv_result_t received;
    try {
      received = zmq::recv_multipart(receiver_, std::back_inserter(frames));
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      LOG(ERROR) << "receive failed: " << e.what();
      continue;
    }
    if (!received) {  // poll timeout: nothing waiting; check for stop
      caught_up_at_.store(MonotonicSeconds());
      continue;
    }
    // Frame 0 is the ROUTER's routing id of the sending socket: kept for Reply.
    std::string route = frames.front().to_string();
    std::string peer;
    for (auto& frame : frames) {
      if (const char* host = zmq_msg_gets(frame.handle(), "Peer-Address")) {
        peer = host;
        break;
      }
    }
    frames.erase(frames.begin());
    Message message;
    try {
      message = Decode(std::move(frames));
      message.route = std::move(route);
      message.peer_host = std::move(peer);
    } catch (const Error& e) {
      malformed_.fetch_add(1);
      LOG(WARNING) << "dropped a malformed message: " << e.what();
      frames.clear();
      continue;
    }
    frames.clear();
    try {
      handler_(std::move(message));
    } catch (const std::exception& e) {
      malformed_.fetch_add(1);
      LOG(ERROR) << "message handler failed: " << e.what();
    }
    // Caught up if nothing else is waiting (under a steady stream of messages
    // the poll seldom times out).
    if (track_caught_up_) {
      const double handled = MonotonicSeconds();
      try {
        if ((receiver_.get(zmq::sockopt::events) & ZMQ_POLLIN) == 0) {
          caught_up_at_.store(handled);
        }
      } catch (const zmq::error_t&) {
        // Closing: the loop ends at its next turn.
      }
    }
  }
}

void Van::ReceiveFromMemory() {
  std::string route;
  std::vector<zmq::message_t> frames;
  while (!stopping_.load(std::memory_order_relaxed)) {
    frames.clear();
    if (!inbox_.Take(kReceivePollMs, &route, &frames)) {
      caught_up_at_.store(MonotonicSeconds());
      continue;
    }
    Message message;
    try {
      message = Decode(std::move(frames));
      message.route = route;
    } catch (const Error& e) {
      malformed_.fetch_add(1);
      LOG(WARNING) << "dropped a malformed message: " << e.what();
      continue;
    }
    try {
      handler_(std::move(message));
    } catch (const std::exception& e) {
      malformed_.fetch_add(1);
      LOG(ERROR) << "message handler failed: " << e.what();
    }
    if (track_caught_up_ && inbox_.Empty()) caught_up_at_.store(MonotonicSeconds());
  }
}

void Van::Inbox::Receive(const std::string& route, std::vector<zmq::message_t>&& frames) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    messages_.emplace(route, std::move(frames));
  }
  arrived_.notify_one();
}

void Van::Inbox::ReceiveReply(std::vector<zmq::message_t>&& frames) {
  std::lock_guard<std::mutex> lock(mutex_);
  replies_.push(std::move(frames));
}

bool Van::Inbox::Take(int wait_ms, std::string* route, std::vector<zmq::message_t>* frames) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!arrived_.wait_for(lock, std::chrono::milliseconds(wait_ms),
                         [this] { return !messages_.empty(); })) {
    return false;
  }
  *route = std::move(messages_.front().first);
  *frames = std::move(messages_.front().second);
  messages_.pop();
  return true;
}

bool Van::Inbox::Empty() {
  std::lock_guard<std::mutex> lock(mutex_);
  return messages_.empty();
}

bool Van::Inbox::TakeReply(std::vector<zmq::message_t>* frames) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (replies_.empty()) return false;
  *frames = std::move(replies_.front());
  replies_.pop();
  return true;
}

}  // namespace keel
