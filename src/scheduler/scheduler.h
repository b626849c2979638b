// Scheduler: the cluster's control plane.
//
// Nodes register with it and get an id and a rank (the one they ask for, if
// free, else the lowest free one); once the expected servers
// and workers have joined it publishes the cluster view (members, the key-range
// to server map, the epoch). It runs barriers, records heartbeats, and ends the
// job when every worker has reported done. A node whose advertised address
// the scheduler cannot connect to is refused, with both addresses named. Training data and
// parameters never pass through it. A node leaves the view when it stops sending heartbeats for
// heartbeat_timeout_s, or at once when its connection closes and its address refuses
// connections (its process died).
//
// It takes the control messages, sends the views and ends the job; each
// mechanism is a class it owns, with its own header: Registration (admission,
// ranks, replacements, the address probes), Departures (heartbeat silence,
// closed connections, what a departure changes; with FailureDetector and
// Suspects), Resharding (servers joining and drained) over RangeChains (key
// ranges' replica chains), CheckpointCoordinator, Preemption, BarrierTable,
// OrphanedShares (a departed worker's share of an epoch), JobProgress,
// MembershipLog. Each is given the part of the scheduler's state it reads and
// changes (Registration, Departures and Resharding share one ClusterState),
// is called under the scheduler's lock, and calls nothing of the scheduler
// but the functions it is given.
//
// Thread-safe: its methods may be called from any thread.
#ifndef KEEL_SCHEDULER_SCHEDULER_H_
#define KEEL_SCHEDULER_SCHEDULER_H_

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "keel.pb.h"
#include "kv/keys.h"
#include "kv/van.h"
#include "scheduler/barriers.h"
#include "scheduler/checkpoint_coordinator.h"
#include "scheduler/cluster_state.h"
#include "scheduler/control_replies.h"
#include "scheduler/departures.h"
#include "scheduler/job_progress.h"
#include "scheduler/lost_ranges.h"
#include "scheduler/members.h"
#include "scheduler/membership_log.h"
#include "scheduler/orphaned_shares.h"
#include "scheduler/preemption.h"
#include "scheduler/range_chains.h"
#include "scheduler/registration.h"
#include "scheduler/resharding.h"

namespace keel {

struct SchedulerOptions {
  std::string bind_host = "0.0.0.0";
  int port = 0;  // 0: any free port
  // The cluster's CURVE keypair (see Van); none: plain TCP.
  std::optional<ClusterSecret> secret;
  // Fault injection on its answers (with faults.control; it sends no data).
  TransportFaults faults;
  int num_servers = 1;
  int num_workers = 1;
  // A node silent this long leaves the view (before the first view: is
  // reported).
  double heartbeat_timeout_s = 10;
  // A node whose connection closes is probed at once and leaves the view if
  // its address refuses connections (Suspects); false: only heartbeats
  // detect failures.
  bool detect_closed_connections = true;
  // A worker that left keeps its rank this long for a replacement (which
  // resumes where the last progress report left off); after that, the rest
  // of its share of each epoch is spread over the other workers.
  double worker_replace_timeout_s = 30;
  // Backups per key range (chain replication), 0 .. num_servers - 1. Range i
  // starts on servers i, i + 1, ..., i + replication (mod num_servers).
  int replication = 0;
  // Key ranges (0: one per server). More ranges than servers let servers
  // join the running job (at most one per range) and be drained from it.
  int key_ranges = 0;
  // A moving range is copied to its new server before that server joins the
  // range's chain, so that pushes wait only for the changes since (false:
  // they wait for the whole copy; for comparison).
  bool precopy = true;
  CheckpointOptions checkpoint;
  // How long to try connecting back to a registering node's advertised
  // address before refusing it as unreachable (and how long a suspect's
  // probe may wait for an answer).
  double connect_timeout_s = 5;
  // Membership changes as JSON lines (MembershipLog); "" for none.
  std::string membership_log;
  // The job's model folder (a path or a storage URI): membership changes and
  // checkpoints go to its timeline/scheduler.jsonl too (io/timeline_writer.h);
  // "" for none.
  std::string model_dir;
  // Preemption: how long the preemption checkpoint may take to commit after
  // the notice before the job ends without it.
  double preemption_grace_s = 90;
  // With replication >= 1, a job in which a key range lost every replica
  // ends with kDataLostExitStatus (see lost_ranges()) unless this is set.
  bool allow_data_loss = false;
  // A key range that lost every replica waits this long (from the loss) for
  // a server removed while alive that held it (FormerHolder) to come back
  // with its copy, before an empty replacement of the range's last rank is
  // admitted to rebuild it from the latest checkpoint.
  double rebuild_wait_s = 10;
  // In-process transport instead of TCP (`keel bench control` beyond the
  // descriptors one process has; see MemoryNetwork); nullptr: TCP.
  std::shared_ptr<MemoryNetwork> memory_network;
  // A new view goes, encoded once, to each member that was sent the view
  // before it as the change from that one (kv/view_delta.h), and whole to
  // the others. False: the whole view, encoded for each member (for
  // comparison: `keel bench control --view_deltas=false`).
  bool view_deltas = true;
  // A job of at least this many workers has its workers' heartbeats relayed
  // by the servers (ClusterView.heartbeat_relay: each worker sends its
  // heartbeats to one server, which passes them on in its own, and one in
  // kRelayDirectEvery to the scheduler itself), so the scheduler takes about one
  // heartbeat a server where it took one a member; 0: never.
  int heartbeat_relay_from = 256;
};

// The largest frame the scheduler accepts: its messages (registrations,
// heartbeats, barriers, reports, checkpoint records) are kilobytes; 64 MiB
// leaves room for a job's largest while a peer sending a bigger one is
// disconnected before the scheduler allocates it.
constexpr int64_t kSchedulerMaxFrameBytes = int64_t{64} << 20;
// What the scheduler knows now, for metrics and status pages.
struct SchedulerStatus {
  uint64_t epoch = 0;  // the view's; 0 until the first view is published
  struct Node {
    int id = 0;
    proto::Role role = proto::WORKER;
    int rank = -1;
    std::string address;         // where it receives (host:port)
    double heartbeat_age_s = 0;  // since it was last heard from
    bool silent = false;         // past the heartbeat timeout and not heard from since
    bool done = false;           // a worker that reported the end of its job
    std::string error;           // ... and the error it reported ("" on success)
  };
  std::vector<Node> members;  // the view's members
  // The key ranges of the latest view: where each begins, its primary's rank,
  // its backups in chain order and those still copying it.
  struct Range {
    uint64_t begin = 0;
    int primary = -1;
    std::vector<int> backups, copying;
  };
  std::vector<Range> ranges;
  // Key ranges that lost every replica during the job (LostRanges), in
  // range order.
  std::vector<LostRange> lost_ranges;
  int expected_servers = 0;
  int expected_workers = 0;
  int replication = 0;
  int workers_done = 0;     // reported the end of their job
  uint64_t departures = 0;  // nodes removed from the view (silent, or their process gone)
  // Members whose connection closed and were probed, and of those the ones
  // found answering (they stayed).
  uint64_t suspected = 0;
  uint64_t suspects_cleared = 0;
  // Spells in which it heard too few of its members to judge silence
  // (most of them not heard for half the heartbeat timeout) and so removed
  // none for silence (FailureDetector::HearsTheCluster).
  uint64_t deaf_spells = 0;
  uint64_t rejected_messages = 0;
  // Workers' heartbeats the servers passed on (heartbeat_relay), and those
  // refused (a worker the server does not relay for, or not a worker).
  uint64_t relayed_heartbeats = 0;
  uint64_t refused_relayed_heartbeats = 0;
  CheckpointStats checkpoints;
  std::string checkpoint_uri;   // where checkpoints go ("" : none)
  std::string last_checkpoint;  // the newest committed (or resumed-from) id; "" : none
  // The latest membership events, oldest first: MembershipLog's JSON lines.
  std::vector<std::string> events;
  double monitor_age_s = 0;  // since the failure-detection loop last ran
};

class Scheduler {
 public:
  // Throws Error if the options are invalid, the port cannot be bound, or the
  // checkpoint to resume from does not verify.
  explicit Scheduler(const SchedulerOptions& options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  int port() const { return van_.port(); }

  // Starts serving the control plane in the background.
  void Start();
  // Blocks until every worker has reported done and every checkpoint copied
  // is committed or abandoned, tells every node to shut down, and returns the
  // number of workers that reported a failure. Returns -1 if `timeout_s`
  // passes first, kPreempted if the job was preempted (see preemption()).
  int WaitForJob(double timeout_s);
  static constexpr int kPreempted = -2;
  void Stop();

  // Starts the preemption (`who` sent the notice, for the log); idempotent.
  // With checkpoints on, every worker stops after the minibatch it has in
  // flight and the job ends once that checkpoint is committed, or after
  // preemption_grace_s without it; with none, the job ends at once. Either
  // way WaitForJob tells every node to shut down and returns kPreempted.
  void Preempt(const std::string& who);
  // How the preemption ended (preempted false before WaitForJob returned
  // kPreempted).
  PreemptionOutcome preemption() const;

  // The current view (epoch 0 until every expected node has registered).
  proto::ClusterView view() const;
  // Its epoch alone (no copy of the view). Waits for a view being sent out:
  // once it returns a new epoch, that view went to every member.
  uint64_t epoch() const;

  // Live resharding: drains server `rank` (`who` asked, for the log). Each of
  // its key ranges is copied to another server while pushes go on, and once
  // none is left on it the server leaves the view and is told to shut down.
  // Returns "" if the drain started (or was under way already), else why not.
  std::string Drain(int rank, const std::string& who);

  // What the scheduler knows now (a copy, taken under its lock). Not to be
  // called while Stop runs (stop whoever reads it, a metrics endpoint, first).
  SchedulerStatus status() const;

  // Messages ignored because they claimed a member's id on a connection other
  // than the one that member registered on, or (REPLICA_SYNC) named a key
  // range the server is not copying.
  uint64_t rejected_messages() const;

  // Key ranges that lost every replica so far (LostRanges), in range order.
  // A job that kept backups (--replication >= 1) and lost one ends with
  // kDataLostExitStatus unless --allow_data_loss (keel scheduler).
  std::vector<LostRange> lost_ranges() const;

  // The job's progress as the workers report it (thread-safe on its own).
  const JobProgress& progress() const { return progress_; }

 private:
  // Message handling (scheduler.cc). OnMessage runs on the Van's thread and
  // takes the lock; every other private method is called with it held.
  void OnMessage(Message&& message);
  // A message from a node not in the view: a node of an earlier run of this
  // scheduler is asked to register again, a removed one hears that it left;
  // both answers go back on the connection the message came on.
  void OnNonMember(const Message& message);
  // Counts and logs (rate-limited) a message refused for `why`.
  void Reject(const proto::Meta& meta, const std::string& why);
  void OnHeartbeat(const proto::Meta& meta, const Member& member);
  // A server's heartbeat passing on workers' (heartbeat_relay); returns the
  // nodes among them that are not members (Meta.beat_direct).
  std::vector<int> OnRelayed(const proto::Meta& meta, const Member& server);
  void OnViewRequest(const proto::Meta& meta);
  void OnWorkerDone(const proto::Meta& meta, const Member& member);
  void OnCheckpoint(const proto::Meta& meta, const Member& member);
  void OnOrphans(const proto::Meta& meta, const Member& member);
  void OnReplicaSync(const proto::Meta& meta, const Member& member);
  void OnSnapshot(const proto::Meta& meta, const Member& member);
  // A worker's progress (with a heartbeat, or PROGRESS): into progress_, or
  // rejected with the reason.
  void OnProgress(const proto::Meta& meta, const Member& member);
  // Whether a member's awaited control request is to be taken: not if it is
  // a copy of one taken already (answered again if its answer went out).
  bool TakeOnce(const proto::Meta& meta);
  void SendTo(int node_id, Message& message);

  // The end of the job (scheduler.cc).
  bool JobOver() const;
  // Logs the workers that failed or left unreplaced; returns how many count
  // as failures (one that left counts only if none of the workers succeeded:
  // `succeeded` of them did).
  int CountFailures(int succeeded) const;
  // Tells every node to shut down (with preemption_: the job was preempted).
  void ShutDownNodes();

  // The view (scheduler.cc).
  // Live workers' and servers' node ids.
  std::set<int> Live(proto::Role role) const;
  // Makes the next view (epoch + 1) from the members and chains and sends it
  // to every member. The first one starts every member's heartbeat clock
  // (nodes send heartbeats once they have a view).
  void PublishView();
  // Whether the job's workers' heartbeats go through servers (at least
  // heartbeat_relay_from workers): ClusterView.heartbeat_relay from the first
  // view on.
  bool RelaysHeartbeats() const;
  // Sends view_ to every member in its role's form (a worker's without the
  // workers' addresses and route digests): as a delta from `previous` (the
  // view before it; epoch 0: none) to those sent `previous`, whole to the
  // others, each form encoded once.
  void SendView(const proto::ClusterView& previous);

  // Registration's probe thread: a registration checked (Registration::OnProbed
  // under the lock).
  void OnProbed(const Message& request, const std::string& refusal);

  // The monitor loop (its own thread): when a member's heartbeat deadline
  // passes, and at least every second, a round of Departures (silent members
  // leave) and ORPHANS requests whose replacement timeout passed are answered.
  void MonitorLoop();
  // The Van's connection watch and the suspects' probe threads: under the lock,
  // to Departures.
  void OnConnectionClosed(int id);
  void OnSuspectProbed(int id, const std::string& address, const AddressProbe& probe);

  // What follows any departure: barriers and checkpoints stop waiting for the
  // node, and a new view goes out.
  void AfterDeparture(int id);

  SchedulerOptions options_;
  TimelineWriter timeline_;
  MembershipLog membership_;
  Van van_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  // The members, ranks, view and chains (Registration, Departures and
  // Resharding are given it).
  ClusterState cluster_;
  BarrierTable barriers_;
  ControlReplies replies_;  // awaited control requests taken, and their answers
  OrphanedShares shares_;
  bool stopping_ = false;
  Resharding resharding_;  // servers joining and drained; holds those being drained
  std::thread monitor_thread_;
  std::unique_ptr<CheckpointCoordinator> checkpoints_;
  std::unique_ptr<Registration> registration_;  // admission, ranks, replacements
  // Silent and dead members leave the view (with the suspects' probes).
  std::unique_ptr<Departures> departures_;
  uint64_t rejected_ = 0;  // see rejected_messages()
  uint64_t relayed_ = 0, refused_relayed_ = 0;  // SchedulerStatus's
  JobProgress progress_;
  double monitor_ran_ = 0;  // MonotonicSeconds() of the monitor's last round
  Preemption preemption_;
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_SCHEDULER_H_
