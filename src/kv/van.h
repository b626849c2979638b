// Van: a node's ZeroMQ transport.
//
// Every node binds one ROUTER socket on which it receives everything (requests
// and responses alike), and keeps one send-only DEALER per peer it talks to.
// A single receive thread decodes incoming messages and hands them to the
// handler; Send may be called from any thread.
//
// Who sent a message, as far as ZeroMQ shows it: every send socket (DEALER)
// of a Van carries the same routing id, 16 random bytes made when the Van is,
// so every receiving ROUTER sees one stable, unguessable route per sending
// node (Message::route). (ZeroMQ needs a routing id unique per ROUTER only;
// with ROUTER_HANDOVER a reconnect with it takes its old route over.) The
// scheduler binds a node id to the route its REGISTER came on and publishes
// the route's digest (RouteDigest) in the view; nodes accept a data message
// only on the route whose digest the view lists for its claimed sender (see
// Node and Scheduler). The limits are written down in
// docs/architecture/security.md ("the control plane").
//
// With a cluster secret (VanOptions::secret) every socket speaks CURVE: the
// ROUTER is a CURVE server with the cluster's secret key, each DEALER a CURVE
// client presenting the cluster's keypair, and a PeerAuthenticator admits
// only clients holding that keypair; everything on the wire is encrypted and
// authenticated. Without one, a Van that listens beyond loopback warns at
// start that anyone who reaches the port is a member.
//
// Fault injection lives here too (TransportFaults): a node can drop or delay a
// share of its outgoing data-plane messages, so that a test or `keel launch
// --faults` exercises the resends and the servers' exactly-once pushes on the
// real code path.
#ifndef KEEL_KV_VAN_H_
#define KEEL_KV_VAN_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <zmq.hpp>

#include "kv/cluster_secret.h"
#include "kv/connection_watch.h"
#include "kv/memory_network.h"
#include "kv/message.h"
#include "kv/peer_authenticator.h"

namespace keel {

// Faults a node injects into its own outgoing traffic. They apply to the data
// plane only (PUSH, PULL, DUMP and CLOCK, requests and responses), which
// survives them: KVWorker resends a request that got no answer, and servers
// apply a push at most once per (sender, sequence). Control messages
// (register, view, barrier, heartbeat, checkpoint, snapshot, worker-done,
// shutdown) are never dropped or delayed: they are not resent today.
struct TransportFaults {
  // Share of outgoing data messages dropped, in [0, 1].
  double drop_rate = 0;
  // Share of outgoing data messages held back before sending, in [0, 1],
  // each for delay_ms plus a uniform extra in [0, delay_jitter_ms]. Messages
  // to one peer still leave in the order they were sent (a later message
  // waits for a delayed earlier one), as on a slow TCP link.
  double delay_rate = 1;
  double delay_ms = 0;
  double delay_jitter_ms = 0;
  // Seeds the decisions: one seed, one sequence of drop/delay decisions
  // (the order of sends across threads aside).
  uint64_t seed = 1;
  // Also drop and delay the control messages their senders mark as sent
  // again when lost (Message::sent_until_answered): requests and answers.
  // The rest of the control plane (REGISTER, VIEW, SHUTDOWN, SNAPSHOT,
  // PROGRESS, REPLICA_SYNC) is never touched.
  bool control = false;

  bool drops() const { return drop_rate > 0; }
  bool delays() const { return delay_rate > 0 && (delay_ms > 0 || delay_jitter_ms > 0); }
  bool any() const { return drops() || delays(); }
  // Throws Error naming the bad setting.
  void Check() const;
};

// What a Van's fault injection did so far.
struct TransportFaultCounts {
  uint64_t data_messages = 0;  // outgoing data-plane messages seen
  uint64_t dropped = 0;
  uint64_t delayed = 0;
  uint64_t discarded_at_stop = 0;  // delayed messages still queued at Stop
};

// The largest frame any socket accepts (ZMQ_MAXMSGSIZE; a peer sending a
// larger one is disconnected before the frame is read, so it cannot make a
// node allocate more). The largest legitimate frame is the keys of a PUSH or
// PULL at kMaxRequestValues (2^27 keys of 8 bytes: 1 GiB); whole tables and
// ranges (DUMP answers, REPLICA_SYNC copies) come in pages of kPageBytes. The
// 64 MiB beyond 1 GiB leave room for a copy's applied sequences (32 KiB per
// worker).
constexpr int64_t kMaxFrameBytes = (int64_t{1} << 30) + (int64_t{64} << 20);
static_assert(kMaxRequestValues * sizeof(Key) <= kMaxFrameBytes, "a PUSH's keys must fit a frame");
static_assert(kPageBytes <= kMaxFrameBytes, "a page must fit a frame");

struct VanOptions {
  // Interface to receive on ("0.0.0.0" for all) and port (0: any free port).
  std::string bind_host = "127.0.0.1";
  int port = 0;
  // Host peers should use to reach this node; empty means bind_host.
  std::string advertise_host;
  TransportFaults faults;
  // The cluster's CURVE keypair; none: plain TCP, anyone who reaches the
  // port may join (fine on loopback only).
  std::optional<ClusterSecret> secret;
  // The largest frame the receiving socket accepts (at most kMaxFrameBytes):
  // a role whose messages are all small (the scheduler) sets less, so that
  // a peer cannot make it allocate more.
  int64_t max_frame_bytes = kMaxFrameBytes;
  // Keep caught_up_at() up to date after every message (a getsockopt per
  // message; the scheduler's failure detection reads it). Off: it advances
  // only when the receive poll times out.
  bool track_caught_up = false;
  // Most ZeroMQ sockets its context may hold (ZMQ_MAX_SOCKETS); 0: libzmq's
  // default (1023). A scheduler holds three per member (a send socket and
  // its connection watch's pair), so it sets more.
  int max_sockets = 0;
  // In-process transport (benchmarks; see MemoryNetwork): no socket is bound
  // and everything goes through the network. No faults nor secret with it.
  std::shared_ptr<MemoryNetwork> memory_network;
};

class Van {
 public:
  // Called on the receive thread with each decoded message. It must not block
  // for long: it holds up every later message.
  using Handler = std::function<void(Message&&)>;

  // Binds the receiving socket. Throws Error if the address cannot be bound,
  // or if options.secret is set and this libzmq has no CURVE.
  explicit Van(const VanOptions& options);
  ~Van();
  Van(const Van&) = delete;
  Van& operator=(const Van&) = delete;

  // "host:port" peers reach this node at.
  const std::string& address() const { return address_; }
  // The routing id every send socket of this Van carries: what a receiving
  // ROUTER sees as Message::route.
  const std::string& routing_id() const { return routing_id_; }
  int port() const { return port_; }

  // Calls `closed(node_id)` whenever the connection of the send socket for
  // `node_id` closes (see ConnectionWatch: on a thread of the Van's, which
  // `closed` must not block for long). Call before the first Connect.
  void WatchConnections(ConnectionWatch::Closed closed);

  // Starts the receive thread.
  void Start(Handler handler);
  // Stops the receive thread and closes every socket; idempotent. Logs what
  // fault injection did, if it was on; delayed messages not yet sent are
  // discarded.
  void Stop();

  // Opens (or re-points) the send socket for `node_id` at "host:port".
  void Connect(int node_id, const std::string& address);
  bool IsConnected(int node_id) const;
  // Closes the send socket for `node_id`; messages already queued are still
  // delivered for up to the linger time.
  void Disconnect(int node_id);
  // Disconnects every node but those in `keep`.
  void DisconnectAllBut(const std::set<int>& keep);
  // Queues `message` for `node_id`. Thread-safe. Throws Error if `node_id` was
  // never connected. A data message may be dropped or held back (see
  // TransportFaults); a message held back is sent later by the delay thread,
  // and lost if the peer is disconnected meanwhile.
  void Send(int node_id, const Message& message);
  // Sends frames Encode made, sharing their buffers with the caller's (one
  // message to many peers, encoded once). For control messages only: no
  // transport fault touches them. Throws Error as Send.
  void SendShared(int node_id, const std::vector<zmq::message_t>& frames);

  // Answers `received` on the connection it came on, so the answer reaches
  // its sender even when the sender's advertised address does not. The
  // receive thread sends it within its poll interval (10 ms). Thread-safe.
  void Reply(const Message& received, const Message& answer);
  // A message that came back on the send socket of `node_id` (an answer
  // sent with Reply), or false if none is waiting. Does not block.
  bool TakeReply(int node_id, Message* reply);

  // Messages dropped because they could not be decoded.
  uint64_t malformed_messages() const { return malformed_.load(); }
  // MonotonicSeconds() when the receive thread last found no message waiting
  // (every message that had arrived by then was handled); 0 before it first
  // did. A receive thread starved of CPU, or behind a backlog, falls behind
  // the clock: the scheduler judges heartbeat silence as of this time.
  double caught_up_at() const { return caught_up_at_.load(); }
  // Connections refused during the CURVE handshake (0 without a secret).
  uint64_t refused_connections() const { return authenticator_ ? authenticator_->refused() : 0; }
  // Lines logged about refused connections (first ones per address, and
  // summaries).
  uint64_t refusal_log_lines() const {
    return authenticator_ ? authenticator_->log().lines_logged() : 0;
  }
  TransportFaultCounts fault_counts() const;

 private:
  struct Peer {
    std::mutex mutex;
    std::string address;
    zmq::socket_t socket;  // none on a MemoryNetwork
    uint64_t watch = 0;    // its ConnectionWatch (or MemoryNetwork) number, if watched
  };

  // This Van's end of a MemoryNetwork: what arrives waits for the receive
  // thread; answers wait for TakeReply.
  class Inbox : public MemoryNetwork::Endpoint {
   public:
    void Receive(const std::string& route, std::vector<zmq::message_t>&& frames) override;
    void ReceiveReply(std::vector<zmq::message_t>&& frames) override;
    // The next message (false if none came within `wait_ms`).
    bool Take(int wait_ms, std::string* route, std::vector<zmq::message_t>* frames);
    bool Empty();
    bool TakeReply(std::vector<zmq::message_t>* frames);

   private:
    std::mutex mutex_;
    std::condition_variable arrived_;
    std::queue<std::pair<std::string, std::vector<zmq::message_t>>> messages_;
    std::queue<std::vector<zmq::message_t>> replies_;
  };

  // A message held back by fault injection.
  struct Delayed {
    double release;  // MonotonicSeconds()
    uint64_t order;  // ties keep send order
    int node_id;
    std::vector<zmq::message_t> frames;
    bool operator>(const Delayed& other) const {
      return release != other.release ? release > other.release : order > other.order;
    }
  };

  // The receiving ROUTER's limits: ZMQ_MAXMSGSIZE, and a reconnecting peer
  // (same routing id) takes over its old route.
  void ConfigureReceiver(int64_t max_frame_bytes);
  // A send socket carrying this Van's routing id.
  zmq::socket_t MakeSendSocket();
  // Closes a peer's send socket (its watch forgotten first). Needs peers_mutex_.
  void ClosePeerLocked(Peer& peer);

  void ReceiveLoop();
  // ReceiveLoop on a MemoryNetwork.
  void ReceiveFromMemory();
  void DelayLoop();
  // Sends encoded frames now. Throws Error if `node_id` is not connected.
  void SendNow(int node_id, std::vector<zmq::message_t>& frames);
  void SendReplies();
  // CURVE (with a secret): the receiving socket as a CURVE server, with its
  // authenticator; a send socket as a CURVE client. No-ops without a secret.
  void ConfigureCurveServer(const VanOptions& options);
  void ConfigureCurveClient(zmq::socket_t& socket) const;

  std::shared_ptr<MemoryNetwork> network_;  // VanOptions::memory_network
  Inbox inbox_;                             // with a network
  ConnectionWatch::Closed closed_;          // with a network: WatchConnections'
  zmq::context_t context_;
  zmq::socket_t receiver_;
  std::optional<ClusterSecret> secret_;
  std::unique_ptr<PeerAuthenticator> authenticator_;
  std::string address_;
  int port_ = 0;
  Handler handler_;
  std::thread receive_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> malformed_{0};
  std::atomic<double> caught_up_at_{0};

  std::mutex replies_mutex_;
  std::vector<std::pair<std::string, std::vector<zmq::message_t>>> replies_;  // route, frames

  mutable std::mutex peers_mutex_;
  std::unordered_map<int, std::shared_ptr<Peer>> peers_;
  const std::string routing_id_;            // of every send socket, for the Van's life
  std::unique_ptr<ConnectionWatch> watch_;  // of the send sockets, if asked for

  // Fault injection (only used when options.faults.any()).
  const TransportFaults faults_;
  mutable std::mutex faults_mutex_;
  std::condition_variable delay_changed_;
  std::mt19937_64 fault_random_;
  const bool track_caught_up_;  // VanOptions::track_caught_up
  TransportFaultCounts fault_counts_;
  std::priority_queue<Delayed, std::vector<Delayed>, std::greater<Delayed>> delayed_;
  // Per peer: keeps each link in order.
  struct Link {
    double last_release = 0;
    int queued = 0;  // held back, not yet sent
  };
  std::unordered_map<int, Link> links_;
  uint64_t next_delayed_order_ = 0;
  bool delay_stopping_ = false;
  std::thread delay_thread_;
};

// 16 random bytes for a send socket's routing id (ZeroMQ reserves ids that
// start with a zero byte: the first is never 0).
std::string RandomRoutingId();

// The SHA-256 of a routing id (32 bytes), as a view lists it. Throws Error if
// libcrypto fails.
std::string RouteDigest(const std::string& routing_id);

// True for the data plane's commands, which fault injection may drop or delay.
bool IsDataPlane(proto::Command command);

// Splits "host:port"; throws Error naming `what` if it is not of that form.
std::pair<std::string, int> ParseHostPort(const std::string& address, const std::string& what);

// The local IP address this machine uses to reach `host` (UDP connect trick).
// Throws Error if there is no route.
std::string LocalAddressToward(const std::string& host, int port);

// Tries a TCP connection to "host:port" for up to `timeout_s`. Returns "" if
// it connected, else why not ("connection refused", "no answer within 3 s").
std::string ProbeAddress(const std::string& address, double timeout_s);

// With a cluster secret: tries a CURVE handshake with the cluster's keypair,
// as a member's send socket would, for up to `timeout_s`. Returns "" if it
// completed, else why not ("connection refused", "it refused the cluster's
// key", "no CURVE handshake within 3 s"). Unlike a bare TCP connection, which
// a node with a secret counts as a peer that hung up in its handshake, this
// probe is not refused. Without a secret, the TCP probe above.
std::string ProbeAddress(const std::string& address, double timeout_s,
                         const std::optional<ClusterSecret>& secret);

// What a probe of a node's address found.
struct AddressProbe {
  std::string failure;   // "" if a node answered, else why not (as ProbeAddress says)
  bool refused = false;  // the host answered that nothing listens there (ECONNREFUSED)
};

// ProbeAddress (with the secret, if any), telling a refused connection, the
// one answer that says no process listens at the address any more, from the
// others (no answer in time, a handshake that failed).
AddressProbe ProbeNode(const std::string& address, double timeout_s,
                       const std::optional<ClusterSecret>& secret);

}  // namespace keel

#endif  // KEEL_KV_VAN_H_
