// PeerAuthenticator: lets only the cluster's members past a Van's receiving
// socket, and says who was turned away.
//
// When a cluster has a secret (cluster_secret.h), a Van's ROUTER is a CURVE
// server. Two kinds of peer are refused during the handshake, before any
// message of theirs reaches the Van:
//   - CURVE clients whose public key is not the cluster's: this object's ZAP
//     handler (RFC 27, inproc://zeromq.zap.01 in the Van's context) answers
//     400 for them;
//   - peers that do not speak CURVE, or not with the cluster's server key:
//     libzmq fails their handshake itself; a socket monitor on the ROUTER
//     reports it.
// Each refusal is counted and handed to a RefusalLog: the first refusal from
// an address is logged with that address, later ones are summarised at most
// once a minute. (The ZAP handler always knows the address; for a failed
// handshake libzmq reports none, and the socket's descriptor, from which it is
// read, may be closed by then: such a refusal is only counted and summarised.)
// A peer that hangs up before its handshake completed (a peer without CURVE
// often does on reading the server's greeting; so does a bare TCP connection)
// is refused the same way: libzmq reports that as a handshake failed without
// detail. The scheduler's check of a registering node's address does a real
// CURVE handshake (ProbeAddress with the secret), so it is not one of them.
#ifndef KEEL_KV_PEER_AUTHENTICATOR_H_
#define KEEL_KV_PEER_AUTHENTICATOR_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <zmq.hpp>

namespace keel {

// Logs refused peers without flooding the log: the first refusal from each
// address (up to kMaxAddresses of them) with its reason, the rest as one
// summary line at most every `summary_interval_s`. Thread-safe.
class RefusalLog {
 public:
  static constexpr size_t kMaxAddresses = 1024;

  // `where` names the socket ("node at 10.0.0.5:7000") in every line.
  explicit RefusalLog(std::string where, double summary_interval_s = 60);
  ~RefusalLog();  // logs what the last summary did not cover

  // Counts one refusal of `address` ("" if unknown) for `reason`; logs it if
  // it is a known address's first, else a summary if one is due.
  void Record(const std::string& address, const std::string& reason);

  uint64_t refused() const;
  // Lines logged so far (first refusals and summaries).
  uint64_t lines_logged() const;

 private:
  void LogSummaryLocked();

  const std::string where_;
  const double summary_interval_s_;
  mutable std::mutex mutex_;
  std::unordered_set<std::string> logged_addresses_;
  uint64_t refused_ = 0;
  uint64_t unlogged_ = 0;  // refusals since the last line
  uint64_t lines_ = 0;
  double last_summary_;  // MonotonicSeconds() of the last summary, or of construction
};

class PeerAuthenticator {
 public:
  // Serves ZAP in `context`, admitting CURVE clients whose public key is
  // `cluster_public_key` (Z85), and watches `receiver`'s handshakes. Call
  // before `receiver` binds, so that no handshake happens without it. Throws
  // Error if another ZAP handler serves `context` already.
  PeerAuthenticator(zmq::context_t& context, zmq::socket_t& receiver,
                    const std::string& cluster_public_key, const std::string& where);
  ~PeerAuthenticator();
  PeerAuthenticator(const PeerAuthenticator&) = delete;
  PeerAuthenticator& operator=(const PeerAuthenticator&) = delete;

  // Stops serving and closes its sockets; idempotent. Call after `receiver`
  // is closed and before the context is.
  void Stop();

  // Connections refused so far (both kinds).
  uint64_t refused() const { return log_.refused(); }
  const RefusalLog& log() const { return log_; }

 private:
  void Serve();
  void AnswerZapRequest();
  void OnMonitorEvent();

  std::string cluster_key_;  // 32 bytes
  zmq::socket_t zap_;
  zmq::socket_t monitor_;
  RefusalLog log_;
  // The monitor's view of open connections: file descriptor -> peer IP.
  std::unordered_map<int, std::string> peers_by_fd_;
  std::string pending_failure_;  // reason of a failed handshake awaiting its disconnect
  bool refused_by_zap_ = false;  // the handshake awaiting its disconnect was (logged there)
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace keel

#endif  // KEEL_KV_PEER_AUTHENTICATOR_H_
