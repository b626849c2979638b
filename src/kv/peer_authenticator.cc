#include "kv/peer_authenticator.h"

#include <arpa/inet.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <zmq.h>

#include <iterator>
#include <optional>
#include <vector>
#include <zmq_addon.hpp>

#include "base/error.h"
#include "base/time.h"
#include "kv/monitor_event.h"

namespace keel {
namespace {

constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";
constexpr char kMonitorEndpoint[] = "inproc://keel-van-handshakes";
constexpr int kPollMs = 100;

// Equal without an early exit: how much of a key matched does not show.
bool SameKey(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) difference |= a[i] ^ b[i];
  return difference == 0;
}

// The remote IP of a connected socket, or "" if it is gone already.
std::string PeerAddressOf(int fd) {
  sockaddr_storage peer{};
  socklen_t length = sizeof(peer);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  const void* ip =
      peer.ss_family == AF_INET6
          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&peer)->sin6_addr)
          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&peer)->sin_addr);
  if (!inet_ntop(peer.ss_family, ip, text, sizeof(text))) return "";
  return text;
}

std::string ProtocolFailure(uint32_t code) {
  switch (code) {
    case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
      return "it does not speak CURVE (no cluster key)";
    case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
      return "its CURVE handshake is not for the cluster's key";
    default:
      return "its handshake broke the protocol (ZMTP error 0x" + [&] {
        char hex[16];
        snprintf(hex, sizeof(hex), "%x", code);
        return std::string(hex);
      }() + ")";
  }
}

}  // namespace

RefusalLog::RefusalLog(std::string where, double summary_interval_s)
    : where_(std::move(where)),
      summary_interval_s_(summary_interval_s),
      last_summary_(MonotonicSeconds()) {}

RefusalLog::~RefusalLog() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (unlogged_ > 0) LogSummaryLocked();
}

void RefusalLog::Record(const std::string& address, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++refused_;
  if (!address.empty() && logged_addresses_.size() < kMaxAddresses &&
      logged_addresses_.insert(address).second) {
    ++lines_;
    LOG(WARNING) << where_ << " refused a connection from " << address << ": " << reason
                 << " (later refusals from there are counted and summarised at most every "
                 << summary_interval_s_ << " s)";
    return;
  }
  ++unlogged_;
  const double now = MonotonicSeconds();
  if (now - last_summary_ >= summary_interval_s_) LogSummaryLocked();
}

void RefusalLog::LogSummaryLocked() {
  ++lines_;
  LOG(WARNING) << where_ << " refused " << unlogged_
               << " connection(s) without the cluster key since its last such line (" << refused_
               << " in all)";
  unlogged_ = 0;
  last_summary_ = MonotonicSeconds();
}

uint64_t RefusalLog::refused() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return refused_;
}

uint64_t RefusalLog::lines_logged() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lines_;
}

PeerAuthenticator::PeerAuthenticator(zmq::context_t& context, zmq::socket_t& receiver,
                                     const std::string& cluster_public_key,
                                     const std::string& where)
    : cluster_key_(32, '\0'),
      zap_(context, zmq::socket_type::rep),
      monitor_(context, zmq::socket_type::pair),
      log_(where) {
  if (!zmq_z85_decode(reinterpret_cast<uint8_t*>(&cluster_key_[0]), cluster_public_key.c_str())) {
    throw MakeError("cluster public key '", cluster_public_key, "' is not Z85");
  }
  zap_.set(zmq::sockopt::linger, 0);
  zap_.set(zmq::sockopt::rcvtimeo, kPollMs);
  try {
    zap_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    throw MakeError("cannot serve ZAP at ", kZapEndpoint, ": ", e.what());
  }
  const int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED |
                     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
  if (zmq_socket_monitor(receiver.handle(), kMonitorEndpoint, events) != 0) {
    throw MakeError("cannot monitor the receiving socket: ", zmq_strerror(zmq_errno()));
  }
  monitor_.set(zmq::sockopt::linger, 0);
  monitor_.connect(kMonitorEndpoint);
  thread_ = std::thread([this] { Serve(); });
}

PeerAuthenticator::~PeerAuthenticator() { Stop(); }

void PeerAuthenticator::Stop() {
  if (stopping_.exchange(true)) return;
  if (thread_.joinable()) thread_.join();
  zap_.close();
  monitor_.close();
}

void PeerAuthenticator::Serve() {
  zmq::pollitem_t items[] = {{zap_.handle(), 0, ZMQ_POLLIN, 0},
                             {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
  while (!stopping_.load(std::memory_order_relaxed)) {
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(kPollMs));
      if (items[0].revents & ZMQ_POLLIN) AnswerZapRequest();
      if (items[1].revents & ZMQ_POLLIN) OnMonitorEvent();
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      LOG(ERROR) << "peer authentication: " << e.what();
    }
  }
}

// A ZAP request (RFC 27): version, request id, domain, address, routing id,
// mechanism, credentials (for CURVE, the client's 32-byte public key). The
// answer: version, request id, status code and text, user id, metadata.
void PeerAuthenticator::AnswerZapRequest() {
  std::vector<zmq::message_t> request;
  if (!zmq::recv_multipart(zap_, std::back_inserter(request), zmq::recv_flags::dontwait)) return;
  const bool well_formed = request.size() >= 6 && request[0].to_string() == "1.0";
  const bool member = well_formed && request.size() == 7 && request[5].to_string() == "CURVE" &&
                      SameKey(request[6].to_string(), cluster_key_);
  std::vector<zmq::message_t> answer;
  answer.emplace_back(std::string("1.0"));
  answer.emplace_back(request.size() > 1 ? request[1].to_string() : std::string());
  answer.emplace_back(std::string(member ? "200" : "400"));
  answer.emplace_back(std::string(member ? "OK" : "not a member of this cluster"));
  answer.emplace_back(std::string(member ? "keel-member" : ""));
  answer.emplace_back(std::string());
  zmq::send_multipart(zap_, answer);
  if (!member) {
    const std::string address = well_formed ? request[3].to_string() : "an unknown address";
    log_.Record(address, "its CURVE key is not the cluster's");
  }
}

// A connection's failed handshake is reported just before its disconnect
// (value: its descriptor), on the one I/O thread, so the failure is matched
// with the next disconnect.
void PeerAuthenticator::OnMonitorEvent() {
  std::vector<zmq::message_t> frames;
  if (!zmq::recv_multipart(monitor_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
    return;
  }
  const std::optional<MonitorEvent> event = ReadMonitorEvent(frames);
  if (!event) return;
  const uint32_t value = event->value;
  const int fd = static_cast<int>(value);
  switch (event->id) {
    case ZMQ_EVENT_ACCEPTED:
      if (peers_by_fd_.size() < 65536) peers_by_fd_[fd] = PeerAddressOf(fd);
      break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      pending_failure_ = ProtocolFailure(value);
      break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      // The connection ended (or timed out) before its handshake did. A
      // failure already reported for it is the one that counts.
      if (pending_failure_.empty() && !refused_by_zap_) {
        pending_failure_ =
            "it hung up before completing a CURVE handshake (no cluster key, or not a ZeroMQ "
            "peer)";
      }
      break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      pending_failure_.clear();  // the ZAP handler logged it, with the address
      refused_by_zap_ = true;
      break;
    case ZMQ_EVENT_DISCONNECTED: {
      auto peer = peers_by_fd_.find(fd);
      // libzmq reports no peer address; the descriptor is often closed
      // before this thread can ask it, and then the refusal is only counted
      // (and summarised): the same peer's next attempt usually shows its
      // address.
      std::string address = peer == peers_by_fd_.end() ? std::string() : peer->second;
      if (peer != peers_by_fd_.end()) peers_by_fd_.erase(peer);
      if (!pending_failure_.empty()) log_.Record(address, pending_failure_);
      pending_failure_.clear();
      refused_by_zap_ = false;
      break;
    }
    default:
      break;
  }
}

}  // namespace keel
