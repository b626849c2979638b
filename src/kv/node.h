// Node: one process's membership in a Keel cluster.
//
// A Node owns the transport (Van) and everything any node needs from the
// scheduler: registration, its id and rank, the cluster view (members, the
// key-range map, the epoch), barriers, heartbeats, preemption, the shutdown
// signal, and control requests that are sent again until answered. Each
// role's own exchanges with the scheduler are built over these in the role's
// folder; the node knows none of them. It is an object, not a global, so a
// test can run several nodes in one process.
// All methods are safe to call from any thread.
//
// Whom it believes (see docs/architecture/security.md, "the control plane"):
// control commands only from the scheduler's connection, which is the one its
// registration answer came on (the answer echoes a random number the node put
// in its REGISTER, which only the process listening at the scheduler's
// address saw) or the node's own connection to the scheduler's address (a
// restarted scheduler's request to register again comes that way). Data
// messages (requests and responses) only from their claimed sender's own
// connection: the route whose digest the view lists for that node (its
// REGISTER carries its Van's routing id; the scheduler publishes the digest of
// the route it came on). Data messages of a newer view wait for it in a
// bounded queue and are checked against that view.
#ifndef KEEL_KV_NODE_H_
#define KEEL_KV_NODE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "keel.pb.h"
#include "kv/keys.h"
#include "kv/message.h"
#include "kv/van.h"

namespace keel {

// A member's heartbeat asks the scheduler for an answer (Meta.ack) once it
// has heard nothing from it for this many heartbeat intervals: its word then
// comes every third heartbeat of a quiet cluster, not every one, and a
// scheduler of 10,000 members sends a third of the answers. A server stops
// after --scheduler_timeout without word (60 s by default).
constexpr double kHeartbeatAnswerAfter = 2.5;
// A worker relaying its heartbeats (ClusterView.heartbeat_relay) hears of the
// scheduler through its server's answers, word up to about
// kHeartbeatAnswerAfter intervals old: its own heartbeats to the scheduler
// ask for an answer after twice that.
constexpr double kRelayingAnswerAfter = 2 * kHeartbeatAnswerAfter;

// Seconds from `wall_now_s` (the wall clock, seconds since the epoch) to a
// member's next heartbeat: the next multiple of `interval_s` at least a
// quarter interval away. Every member beats on the same boundaries of the
// clock, so a cluster's heartbeats reach the scheduler together and its
// threads (and ZeroMQ's) wake once for many, not once for each: at 1,000
// members over TCP its share of a core halved (docs/benchmarks/history.md,
// "Heartbeats on the clock's boundaries"). The quarter keeps a timer that
// ends a little early from beating twice.
double NextHeartbeatDelay(double wall_now_s, double interval_s);

// ClusterView.heartbeat_relay: worker `worker_rank` sends its heartbeats to
// the server of this rank, which passes them on in its own; the scheduler
// takes them from that server alone. Every kRelayDirectEvery-th goes to the
// scheduler itself, as do all of them while the view has no server of that
// rank, and the next after its server said the scheduler does not count it
// (Meta.beat_direct: restarted, it asks the worker to register again, or it
// removed the worker). A server's answer says how long since it heard from
// the scheduler, which the worker counts as word from it, so that its own
// heartbeats to the scheduler rarely ask for an answer.
int HeartbeatRelayRank(int worker_rank, int num_servers);
constexpr int kRelayDirectEvery = 30;
// A server answers each heartbeat it takes to pass on; a worker whose last
// two relayed heartbeats went unanswered (its server hung or cut off, not yet
// out of the view) sends the next to the scheduler, so the scheduler hears it
// at least every third interval. A heartbeat larger than kMaxRelayedBytes
// (a worker's is about a hundred bytes) goes to the scheduler, and a server
// passes on at most kMaxRelayedBytesPerBeat in one heartbeat (the rest in its
// next), within the scheduler's frame bound.
constexpr int kRelayUnansweredMax = 2;
constexpr size_t kMaxRelayedBytes = 16 << 10;
constexpr size_t kMaxRelayedBytesPerBeat = 16 << 20;

// The scheduler's node id.
constexpr int kSchedulerId = 0;

// A control request still unanswered is sent again at the heartbeat after it
// went out, then after twice as long each time, up to this many heartbeat
// intervals.
constexpr double kControlResendMaxHeartbeats = 8;

// How long a node waits for the answer to its REGISTER (or for the first
// view after it) before sending it again.
constexpr double kRegisterResendS = 1;

// How many of the tagged barriers it passed a node brings to a restarted
// scheduler (the latest; a training job passes three an epoch).
constexpr int kMaxPassedBarriers = 4096;

// Role masks for barriers.
constexpr int RoleBit(proto::Role role) { return 1 << static_cast<int>(role); }
constexpr int kServerGroup = RoleBit(proto::SERVER);
constexpr int kWorkerGroup = RoleBit(proto::WORKER);
constexpr int kAllGroup = kServerGroup | kWorkerGroup;

struct NodeOptions {
  proto::Role role = proto::WORKER;
  // The scheduler's "host:port".
  std::string scheduler;
  // Interface and port this node receives on (port 0: any free port).
  std::string bind_host = "0.0.0.0";
  int port = 0;
  // Host peers use to reach this node; empty: the local address that routes
  // to the scheduler.
  std::string advertise_host;
  // The rank to ask for (-1: any free rank).
  int rank = -1;
  // Joins a running job rather than filling one of its ranks (live
  // resharding; the scheduler says which roles may): it takes `rank` (or the
  // next free one).
  bool join = false;
  // How long Start waits for the scheduler's view.
  double register_timeout_s = 30;
  double heartbeat_interval_s = 1;
  // A worker relaying its heartbeats sends one in this many (at least 1) to
  // the scheduler itself (kRelayDirectEvery; a test sets more, to see that
  // the others reach it when they must).
  int relay_direct_every = kRelayDirectEvery;
  // Faults this node injects into its outgoing data messages (see Van).
  TransportFaults faults;
  // The cluster's CURVE keypair (see Van); none: plain TCP.
  std::optional<ClusterSecret> secret;
  // Fields a protocol built over this node adds to each REGISTER it sends
  // (merged into its meta; a server's held copy of its key ranges,
  // server/held_copy.h).
  proto::Meta register_fields;
};

class Node {
 public:
  // Handles data messages (PUSH, PULL, ...: requests and responses). Runs on
  // the receive thread.
  using DataHandler = std::function<void(Message&&)>;

  explicit Node(NodeOptions options);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Set before Start.
  void SetDataHandler(DataHandler handler) { data_handler_ = std::move(handler); }
  // Called on the receive thread with every new view, before data messages of
  // that epoch are handled. Set before Start.
  void SetViewHandler(std::function<void(const proto::ClusterView&)> handler) {
    view_handler_ = std::move(handler);
  }

  // Handles control commands from the scheduler that the node does not handle
  // itself (and that answer none of its requests). Runs on the receive thread.
  // Set before Start.
  void SetControlHandler(std::function<void(Message&&)> handler) {
    control_handler_ = std::move(handler);
  }

  // Binds, registers with the scheduler and waits for the first view. Throws
  // Error if the scheduler does not answer within register_timeout_s, refuses
  // the node, or admits it but publishes no view within that time (the
  // cluster did not form).
  void Start();
  // Stops heartbeats and the transport; idempotent.
  void Stop();

  proto::Role role() const { return options_.role; }
  int id() const { return id_; }
  int rank() const { return rank_; }
  const std::string& address() const;

  // The current view and its key-range map (a snapshot; the view may change).
  std::shared_ptr<const proto::ClusterView> view() const;
  std::shared_ptr<const RangeMap> ranges() const;
  uint64_t epoch() const { return epoch_.load(); }
  // Node id of the server with `server_rank` in the current view; throws Error if none.
  int ServerId(int server_rank) const;

  // Stamps sender and epoch on `message` and sends it to `node_id`, connecting
  // first if needed. Throws Error if `node_id` is not in the view.
  void Send(int node_id, Message& message);
  // A fresh sequence number for a request from this node.
  uint64_t NextSequence() { return next_sequence_.fetch_add(1) + 1; }

  // Blocks until every node in `group` (a mask of RoleBit) has called Barrier
  // with the same group (and `tag`). A node that arrives at a tagged barrier
  // the group has already passed (it joined late, replacing a node) is
  // released at once. Throws Error after `timeout_s`.
  void Barrier(int group, double timeout_s, const std::string& tag = "");

  // The scheduler no longer counts this node as a member (it was silent too
  // long and left the view).
  bool removed() const { return removed_.load(); }
  // The scheduler's answer to this node's registration: its id and rank, and
  // whatever else the scheduler tells a newcomer for the protocols built over
  // the node.
  proto::Meta registration() const;
  // The fields this node adds to each REGISTER (NodeOptions::register_fields).
  const proto::Meta& register_fields() const { return options_.register_fields; }

  // Sends a message to the scheduler (stamping sender and epoch).
  void SendToScheduler(Message& message);
  // From now on every heartbeat goes to the scheduler itself, none through a
  // server (a worker whose job failed waits for the scheduler's word that it
  // left the cluster).
  void HeartbeatToTheSchedulerOnly() { beat_direct_ = true; }

  // How a control request's wait ended (Request).
  enum class ControlOutcome {
    kAnswered,  // the scheduler answered
    kTimedOut,  // no answer within the time allowed
    kStopped,   // this node was stopped meanwhile (whether or not the answer came)
    kShutdown,  // the scheduler ended the job before answering
    kRemoved,   // this node left the cluster before the answer came
  };
  struct ControlAnswer {
    ControlOutcome outcome = ControlOutcome::kTimedOut;
    // Whether the scheduler's answer came (also with kStopped), and the answer.
    bool answered = false;
    proto::Meta meta;
  };
  // Sends control request `request` to the scheduler and blocks until it
  // answers (a message of the same command echoing the request's sequence),
  // `timeout_s` passes, this node is stopped or leaves the cluster, or the
  // scheduler ends the job. Until answered, the request is sent again on the
  // heartbeat thread (first after a heartbeat interval, then twice as long
  // each time, up to kControlResendMaxHeartbeats intervals) and to a restarted
  // scheduler once this node is registered with it; the scheduler takes each
  // once. `name` names it in the logs and is unique among the requests
  // awaiting an answer (the sequence in it). Throws Error if it cannot be sent.
  ControlAnswer Request(Message& request, const std::string& name, double timeout_s);
  // Sends `request` to the scheduler and again, as Request does, until the
  // scheduler answers it; nothing waits for the answer.
  void Post(Message& request, const std::string& name);

  // What the protocols built over this node add to what it sends on its own:
  // `fill` adds fields to every heartbeat; for a restarted scheduler, `rejoin`
  // adds fields to the REGISTER that registers this node again, and `resend`
  // gives requests sent again once it is registered (after the requests
  // still awaiting an answer), answered before or not. They run with the
  // node's lock held and must not call the node. Set from any thread at any
  // time; an empty function removes one.
  void SetHeartbeatFields(std::function<void(proto::Meta*)> fill);
  void SetRejoinFields(std::function<void(proto::Meta*)> rejoin,
                       std::function<std::vector<proto::Meta>()> resend);

  // Blocks until the scheduler says the job is over (true) or `timeout_s`
  // passes (false).
  bool WaitForShutdown(double timeout_s);
  bool shutdown_requested() const { return shutdown_.load(); }

  // Tells the scheduler this node was told to go (a SIGTERM: the notice spot
  // instances get before they go), so that it checkpoints the job and ends it.
  // Sent again with every heartbeat until the scheduler answers. Idempotent.
  void RequestPreemption();
  // The scheduler answered a preemption request or ordered this node to stop
  // for the preemption checkpoint.
  bool preempting() const { return preempting_.load(); }
  // The job ended by preemption (the SHUTDOWN said so); `*uri` and the result
  // name the checkpoint it committed ("" if none). False before the SHUTDOWN.
  bool preempted(std::string* checkpoint, std::string* uri) const;
  // Seconds since the scheduler last answered a heartbeat.
  double SecondsSinceScheduler() const;
  // Seconds since the heartbeat loop last finished a round (whether or not
  // the scheduler answered) or started; 0 before Start. A live node keeps it
  // below about heartbeat_interval_s.
  double SecondsSinceHeartbeatRound() const;

  // Messages dropped by the transport because they could not be decoded.
  uint64_t malformed_messages() const;
  // What fault injection did to this node's outgoing messages.
  TransportFaultCounts transport_fault_counts() const;
  // Control messages ignored because they did not come from the scheduler.
  uint64_t rejected_control_messages() const { return rejected_control_.load(); }
  // Data messages dropped: from a newer view beyond the held queue's bounds
  // (kMaxHeldPerSender, kMaxHeldMessages, kMaxHeldBytes, kMaxEpochsAhead), or
  // not on their claimed sender's connection (misrouted_data_messages).
  uint64_t rejected_data_messages() const { return rejected_data_.load(); }
  // Of those, the ones whose route is not the one the view lists for their
  // claimed sender (a forged sender, or one not in the view).
  uint64_t misrouted_data_messages() const { return misrouted_data_.load(); }
  // The routing id this node's send sockets carry (what its peers see).
  const std::string& routing_id() const;
  // Data messages held now, waiting for a newer view.
  size_t held_messages() const;
  // Control requests sent (Request, Post) and not yet answered.
  size_t awaited_requests() const;

  // Bounds of the queue of data messages from a newer view. A dropped request
  // is sent again by its worker (KVWorker resends what gets no answer), so
  // dropping loses nothing already accepted.
  static constexpr size_t kMaxHeldPerSender = 1024;
  static constexpr size_t kMaxHeldMessages = 8192;
  static constexpr size_t kMaxHeldBytes = size_t{1} << 30;
  // Views come one epoch at a time; a message further ahead is not held.
  static constexpr uint64_t kMaxEpochsAhead = 1024;

 private:
  // Start's steps: the transport, then registration with the scheduler
  // (throws Error if refused or unanswered by the deadline).
  void StartVan();
  void Register();
  void SendRegister();
  // A new random number for a REGISTER, remembered among the latest
  // kRegisterNonces (mutex_ held).
  uint64_t NewRegisterNonceLocked();
  // Waits (releasing `lock` meanwhile) until the scheduler answered the
  // registration or `deadline` passed.
  void AwaitRegistration(std::unique_lock<std::mutex>& lock, double deadline);
  bool RegistrationAnsweredLocked() const;

  // Everything the transport receives, on its receive thread.
  void OnMessage(Message&& message);
  // Whether a control message comes from the scheduler (see the class
  // comment); binds the scheduler's connection on a registration answer.
  bool FromScheduler(const Message& message);
  // Counts and logs (rate-limited) a message refused for `why`.
  void Reject(std::atomic<uint64_t>* counter, const proto::Meta& meta, const std::string& why);
  // A data message: to the data handler, or held if it comes from a newer view.
  void OnData(Message&& message);
  // Holds a data message of a newer view, within the bounds; false if dropped.
  bool Hold(Message&& message);
  // Hands a data message to the data handler if it came on its claimed
  // sender's connection; else counts, logs (rate-limited) and drops it.
  void Deliver(Message&& message);
  // Whether `message` came on the route whose digest the view lists for its
  // claimed sender.
  bool OnSendersConnection(const Message& message);
  // A server: keeps a worker's heartbeat to pass on in its own
  // (ClusterView.heartbeat_relay), if the worker is one it relays for.
  void TakeRelayed(const Message& message);
  // A worker: the id of the server its heartbeats go to, -1 if they go to
  // the scheduler (no relay in the view, or no server of the rank).
  int RelayServerId() const;
  void OnRegisterAnswer(const proto::Meta& meta);
  // Sends the control requests still awaiting an answer again.
  void ResendAwaitedLocked();
  void OnView(const proto::ClusterView& view);
  // A view sent as a delta: applied to the view held, or (held is not its
  // base) the whole view asked for. False if no new view was taken.
  bool OnViewDelta(const proto::ViewDelta& delta);
  void CallViewHandler();
  // Hands the data messages held for a view this node now has to the handler.
  void ReleaseHeld();
  // `own_connection`: the answer came back on this node's own connection to
  // the scheduler's address (only such an answer may ask it to register again).
  void OnHeartbeatAnswer(const proto::Meta& meta, bool own_connection);
  void HeartbeatLoop();
  // Handles what came back on this node's own connection to the scheduler.
  void TakeSchedulerReplies();
  // Sends a control request and remembers it under `key` until answered
  // (`waited`: someone waits for the answer, which is kept for it).
  void SendAwaited(const std::string& key, Message& request, bool waited = false);
  // Takes an answer for `key`: false if nothing awaits it (a copy, or its
  // waiter gave up). Holds mutex_.
  bool Answered(const std::string& key);
  // Takes the scheduler's answer to a request sent with Request or Post;
  // ignores one nothing awaits any more. Holds mutex_.
  void TakeAnswerLocked(const proto::Meta& answer);
  // Sends again the awaited requests whose wait ran out. Holds mutex_.
  void ResendOverdueLocked(double now);
  // Sends an awaited request to the scheduler again, as this node now. Holds
  // mutex_.
  // `until_answered`: `request` is one this node sends until answered.
  void SendAgainLocked(const proto::Meta& request, bool until_answered);
  // A restarted scheduler asked this node to register again (it does so at
  // every heartbeat until the node is registered with it). One REGISTER at a
  // time, and another once kRegisterResendS passed without an answer: the
  // scheduler may have died with the first, or with its answer, and the next
  // one started in its place asks again.
  void Rejoin();
  // What a restarted scheduler learns from this node's REGISTER: its view,
  // the tagged barriers it passed, and the rejoin fields. Holds mutex_.
  void FillRejoinLocked(proto::Meta* request) const;
  // An answer to awaited request `key` came: remembers what a restarted
  // scheduler needs of it (a tagged barrier passed). Holds mutex_.
  void RememberAnswerLocked(const std::string& key);

  NodeOptions options_;
  std::unique_ptr<Van> van_;
  DataHandler data_handler_;
  std::function<void(const proto::ClusterView&)> view_handler_;
  std::function<void(Message&&)> control_handler_;
  std::atomic<int> id_{-1};
  std::atomic<int> rank_{-1};
  std::atomic<uint64_t> epoch_{0};
  std::atomic<uint64_t> next_sequence_{0};
  std::atomic<bool> shutdown_{false};
  std::atomic<bool> preempting_{false};
  std::atomic<bool> removed_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> last_scheduler_contact_ns_{0};
  std::atomic<int64_t> last_heartbeat_round_ns_{0};
  std::atomic<uint64_t> rejected_control_{0};
  std::atomic<uint64_t> rejected_data_{0};
  std::atomic<uint64_t> misrouted_data_{0};

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string refused_;  // the scheduler's reason for refusing registration
  std::shared_ptr<const proto::ClusterView> view_;
  std::shared_ptr<const RangeMap> ranges_;
  // Per sender in the view, the route found to match its digest (so each
  // route is hashed once per view).
  std::map<int, std::string> checked_routes_;
  // A server's: workers' heartbeats taken since its last (by worker id), and
  // when each came (MonotonicNanos).
  std::map<int, std::pair<proto::RelayedHeartbeat, int64_t>> relayed_;
  // A server's: workers the scheduler did not count (Meta.beat_direct), each
  // told so in the answer to its next relayed heartbeat.
  std::set<int> beat_direct_asked_;
  uint64_t beats_ = 0;                          // heartbeats sent (the heartbeat thread's)
  std::atomic<int> relay_unanswered_{0};  // a worker's relayed heartbeats since its server answered
  std::atomic<bool> beat_direct_{false};  // HeartbeatToTheSchedulerOnly
  std::atomic<bool> beat_direct_next_{false};   // its server said: the next to the scheduler
  std::map<uint64_t, bool> barriers_released_;  // barrier id -> released
  // Data messages from a newer epoch, held until this node has that view;
  // per sender, how many; in all, how many bytes.
  std::vector<Message> held_;
  std::map<int, size_t> held_per_sender_;
  size_t held_bytes_ = 0;
  // The random numbers in this node's latest REGISTERs (the latest last, at
  // most kRegisterNonces), one of which the scheduler's answer echoes: a
  // scheduler slower to answer than the node's resend interval answers an
  // earlier one. The route that answer came on is the scheduler's connection.
  static constexpr size_t kRegisterNonces = 64;
  std::deque<uint64_t> register_nonces_;
  std::string scheduler_route_;
  uint64_t next_barrier_ = 0;
  // The commands of the awaited requests: the scheduler's messages of these
  // commands (but BARRIER and PREEMPT, which the node handles) are answers. The answers a Request
  // waits for, by its name.
  std::set<int> answer_commands_;
  std::map<std::string, proto::Meta> answers_;
  proto::Meta registration_;
  std::function<void(proto::Meta*)> heartbeat_fields_, rejoin_fields_;
  std::function<std::vector<proto::Meta>()> rejoin_resend_;
  // Control requests still awaiting the scheduler's answer (those sent with
  // Post too): sent again on the heartbeat thread while unanswered,
  // first after a heartbeat interval, doubling up to kControlResendMaxHeartbeats (the
  // scheduler takes each once: ControlReplies), and to a restarted scheduler
  // once this node is registered with it. A waiter that gives up removes its
  // request.
  struct Awaited {
    proto::Meta meta;
    double next_send = 0;  // MonotonicSeconds() of its next resend
    double wait = 0;       // the wait before that one
    bool waited = false;   // a Request waits for its answer
  };
  std::map<std::string, Awaited> awaiting_;
  // A REGISTER to a restarted scheduler is unanswered; sent at this
  // MonotonicSeconds().
  bool rejoining_ = false;
  double rejoin_sent_ = 0;
  // Tagged barriers released to this node, oldest first (at most
  // kMaxPassedBarriers): for a restarted scheduler.
  std::vector<proto::PassedBarrier> passed_barriers_;
  // The SHUTDOWN of a preempted job: the checkpoint it committed.
  bool preempted_ = false;
  std::string preempted_checkpoint_, preempted_uri_;

  std::thread heartbeat_thread_;
};

}  // namespace keel

#endif  // KEEL_KV_NODE_H_
