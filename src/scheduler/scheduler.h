// Scheduler: the cluster's control plane.
//
// Nodes register with it and get an id and a rank (the one they ask for, if
// free, else the lowest free one); once the expected servers
// and workers have joined it publishes the cluster view (members, the key-range
// to server map, the epoch). It runs barriers, records heartbeats, and ends the
// job when every worker has reported done. A node whose advertised address
// the scheduler cannot connect to is refused, with both addresses named. Training data and
// parameters never pass through it. A worker that stops sending heartbeats for heartbeat_timeout_s
// leaves the view.
#ifndef KEEL_SCHEDULER_SCHEDULER_H_
#define KEEL_SCHEDULER_SCHEDULER_H_

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "keel.pb.h"
#include "kv/keys.h"
#include "kv/van.h"
#include "scheduler/checkpoint_coordinator.h"
#include "scheduler/membership_log.h"

namespace keel {

struct SchedulerOptions {
  std::string bind_host = "0.0.0.0";
  int port = 0;  // 0: any free port
  int num_servers = 1;
  int num_workers = 1;
  // A node silent this long is reported (failure handling acts on it later).
  double heartbeat_timeout_s = 10;
  // A worker that left keeps its rank this long for a replacement (which
  // resumes where the last progress report left off); after that, the rest
  // of its share of each epoch is spread over the other workers.
  double worker_replace_timeout_s = 30;
  // Backups per key range (chain replication), 0 .. num_servers - 1. Range i
  // starts on servers i, i + 1, ..., i + replication (mod num_servers).
  int replication = 0;
  CheckpointOptions checkpoint;
  // How long to try connecting back to a registering node's advertised
  // address before refusing it as unreachable.
  double connect_timeout_s = 5;
  // Membership changes as JSON lines (MembershipLog); "" for none.
  std::string membership_log;
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
  // is committed or abandoned, tells every node to shut down, and returns the number of workers that reported a failure. Returns
  // -1 if `timeout_s` passes first.
  int WaitForJob(double timeout_s);
  void Stop();

  // The current view (epoch 0 until every expected node has registered).
  proto::ClusterView view() const;

 private:
  struct Member {
    proto::NodeInfo info;
    double last_heartbeat = 0;
    bool reported_silent = false;
  };

  void OnMessage(Message&& message);
  // Checks in the background that the node's advertised address accepts a
  // connection, then admits or refuses it.
  void OnRegister(const Message& request);
  void Admit(const Message& request);
  void OnBarrier(const proto::Meta& meta);
  void OnWorkerDone(const proto::Meta& meta);
  void OnCheckpoint(const proto::Meta& meta);
  void OnOrphans(const proto::Meta& meta);
  // Answers the ORPHANS requests waiting for `epoch`: when every rank's share
  // is done, or with parts of a share whose worker left long enough ago.
  void TryOrphans(int epoch);
  bool JobOver() const;
  // Live workers' and servers' node ids.
  std::set<int> Live(proto::Role role) const;
  // Releases `group`'s barrier if every member of it has arrived.
  void TryReleaseBarrier(int group);
  // A worker silent past the heartbeat timeout leaves: a new view (epoch + 1)
  // goes to every node, its barriers stop waiting for it, and its rank waits
  // for a replacement (Vacancy).
  void RemoveWorker(int id, const std::string& reason);
  // A server silent past the heartbeat timeout leaves the view: in each key
  // range's chain the next replica takes its place (a backup is promoted
  // where it was the primary). A range it held alone waits for a server
  // started again with its rank, which restores it from the latest checkpoint.
  void RemoveServer(int id, const std::string& reason);
  // A server taking `rank` back: the ranges the rank held alone come from the
  // latest checkpoint (filled into `reply`); then every range whose primary is
  // live gets back, at the end of its chain, the live servers it started on
  // and lacks (this one among them), each to copy it from its predecessor.
  void ReplaceServer(int rank, Message* reply);
  // Gives every range whose primary is live the live servers it started on
  // and lacks, at the end of its chain, each to copy the range from its
  // predecessor (marked in copying_). Returns, per rank added, the ranges it
  // joined and the predecessor in each.
  std::map<int, std::vector<std::pair<size_t, int>>> RepairChains();
  void PublishView();
  void SendTo(int node_id, Message& message);
  // Answers a registration with `reason` on the connection it came on.
  void Refuse(const Message& request, const std::string& reason);
  void MonitorLoop();

  SchedulerOptions options_;
  MembershipLog membership_;
  Van van_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int, Member> members_;  // by node id
  int next_id_ = 1;  // the next fresh node id (see the constructor)
  std::set<int> server_ranks_, worker_ranks_;  // ranks given out
  proto::ClusterView view_;
  // Key ranges and their chains: made at the first view, then changed by
  // departures and replacements (or taken from a node that rejoins a
  // restarted scheduler).
  RangeMap ranges_;
  uint64_t ranges_epoch_ = 0;  // the view epoch `ranges_` came from
  // Per range: ranks that joined its chain and have not yet reported that its
  // copy arrived (REPLICA_SYNC). They are not promoted in place of the last
  // replica that holds the rows.
  std::map<size_t, std::set<int>> copying_;
  // Per barrier group: the nodes waiting, with the barrier id and tag each used.
  std::map<int, std::map<int, std::pair<uint64_t, std::string>>> barriers_;
  std::map<int, std::string> done_;  // worker node id -> error ("" on success)
  bool published_ = false;           // a view has gone out
  std::set<int> removed_ids_;        // nodes this scheduler removed from the view
  std::map<int, double> server_vacant_;  // server rank -> when its server left
  // Workers' last progress reports, by rank.
  std::map<int, proto::WorkerCursor> progress_;
  // Ranks whose worker left: where it was, when and why.
  struct Vacancy {
    proto::WorkerCursor cursor;
    double since = 0;
    std::string reason;
  };
  std::map<int, Vacancy> vacant_;
  // Per epoch: ranks whose share is done, orphaned shares handed out (rank ->
  // parts, parts finished), and ORPHANS requests waiting (node -> sequence).
  struct EpochWork {
    std::set<int> done;
    std::map<int, std::pair<int, std::set<int>>> orphans;
    std::map<int, uint64_t> waiting;
    // Examples read: of each rank's own share (its latest report), and of
    // each handed-over part (rank, part).
    std::map<int, uint64_t> examples;
    std::map<std::pair<int, int>, uint64_t> part_examples;
  };
  std::map<int, EpochWork> epochs_;
  // Tagged barriers already released, per group.
  std::map<int, std::set<std::string>> released_tags_;
  bool stopping_ = false;
  std::thread monitor_thread_;
  std::unique_ptr<CheckpointCoordinator> checkpoints_;
  std::vector<std::thread> probes_;  // reachability checks of registering nodes
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_SCHEDULER_H_
