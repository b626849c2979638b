// Registration: admitting nodes into the cluster.
//
// A REGISTER's advertised address is checked first (RegistrationProbes, which
// it owns); then the node gets an id and a rank (the one it asks for, if free,
// else the lowest free one) and its answer, and once every expected server
// and worker holds a rank the scheduler publishes a view. What a registration
// replaces is settled here too: a worker taking a vacant rank resumes its
// predecessor's work (OrphanedShares), a server taking a departed server's
// rank takes back its ranges (from live replicas, from the copy it kept if it
// was removed while alive, or from the latest checkpoint), and the nodes of an
// earlier run of a restarted scheduler register again with what they know of
// that run.
//
// It changes the scheduler's state it is given (ClusterState) and calls
// nothing of the scheduler but its Hooks: sending, answering on a request's
// connection, connecting to an admitted node, publishing a view, and the
// departure of an earlier run's holder that a new node replaced.
//
// Not synchronized: the scheduler calls it under its lock. The probes'
// callback runs on a probe thread: it is the scheduler's, which takes its
// lock and calls OnProbed.
#ifndef KEEL_SCHEDULER_REGISTRATION_H_
#define KEEL_SCHEDULER_REGISTRATION_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "keel.pb.h"
#include "kv/message.h"
#include "scheduler/barriers.h"
#include "scheduler/cluster_state.h"
#include "scheduler/lost_ranges.h"
#include "scheduler/members.h"
#include "scheduler/membership_log.h"
#include "scheduler/orphaned_shares.h"
#include "scheduler/range_chains.h"
#include "scheduler/registration_probes.h"
#include "scheduler/resharding.h"

namespace keel {

class Registration {
 public:
  struct Hooks {
    // Sends a control message to a member (the scheduler stamps it).
    std::function<void(int node_id, Message& message)> send;
    // Answers `request` on the connection it came on.
    std::function<void(const Message& request, Message& reply)> reply;
    // Connects to an admitted node at `address` as `id`; throws Error if it
    // cannot.
    std::function<void(int id, const std::string& address)> connect;
    // Publishes the next view to every member.
    std::function<void()> publish_view;
    // `holder`, a member of an earlier run's view that did not register
    // again, leaves the cluster for `reason` as if found dead.
    std::function<void(const proto::NodeInfo& holder, const std::string& reason)> depart;
    // The newest committed checkpoint ("" none) and its `uri`.
    std::function<std::string(std::string* uri)> latest_checkpoint;
  };

  // `cluster`: the scheduler's state it reads and changes; `membership`,
  // `barriers`, `shares` and `resharding`: the scheduler's, told of the nodes
  // it admits (each outlives this object). `first_id`: the first fresh node id
  // this run gives out. `rebuild_wait_s`: see SchedulerOptions. `probes`
  // checks registering nodes' addresses; their callback calls OnProbed under
  // the scheduler's lock.
  Registration(ClusterState* cluster, MembershipLog* membership, BarrierTable* barriers,
               OrphanedShares* shares, Resharding* resharding, Hooks hooks, int first_id,
               double rebuild_wait_s, std::unique_ptr<RegistrationProbes> probes);

  // A REGISTER: queues the node's advertised address for a check, or refuses
  // it at once if too many wait (or its routing id is not its connection's).
  void OnRegister(const Message& request);
  // A registration checked: admits the node or refuses it with `refusal`.
  void OnProbed(const Message& request, const std::string& refusal);
  // Stops the probes (joining their threads); call without the scheduler's
  // lock.
  void Stop();

 private:
  // Whether every expected server and worker holds a rank.
  bool Complete() const;
  // Gives the node an id and a rank, answers it, and publishes a view once
  // the cluster is complete. A worker taking a vacant rank resumes its
  // predecessor's work; a server taking a departed server's rank takes back
  // its ranges.
  void Admit(const Message& request);
  // Why `node` may not join ("" if it may); `taken` holds its role's ranks;
  // `join`: a server joining the running job.
  std::string AdmissionRefusal(const proto::NodeInfo& node, const std::set<int>& taken,
                               bool join) const;
  // The rank a node asking for none gets.
  int FreeRank(proto::Role role, const std::set<int>& taken, bool join) const;
  // Why a node of an earlier run of this scheduler may not join again with
  // what it claims ("" if it may): its view must name it with the id, role
  // and rank it asks for, at the epoch it sends, and its key ranges must fit
  // the job (RangeChains::CheckFits).
  std::string RejoinRefusal(const Message& request) const;
  // Whether a worker registering with `rank` takes over a vacant one; fills
  // `resume` with where it picks up.
  bool TakesOver(int rank, proto::WorkerCursor* resume) const;
  // The member a registration makes, with `rank`; a node of an earlier run of
  // this scheduler keeps its id and brings its view's epoch and chains.
  Member NewMember(const Message& request, int rank);
  // Answers an admitted node with its id and rank (and, for a replacement,
  // where to resume), echoing `nonce` (its REGISTER's sequence), and records
  // the join.
  void AnswerRegistration(const Member& member, bool rejoin, const proto::WorkerCursor* resume,
                          uint64_t nonce, bool join = false, const proto::HeldCopy* held = nullptr);
  // A server taking `rank` back: the ranges the rank held alone come from the
  // latest checkpoint (filled into `reply`); then every range whose primary is
  // live gets back, at the end of its chain, the live servers it started on
  // and lacks (this one among them), each to copy it from its predecessor.
  // `held`: the copy a server removed while alive brings back (nullptr:
  // none); where it is the freshest left of a range that lost every replica,
  // the range is rebuilt from it instead (UseHeldCopy).
  void ReplaceServer(int rank, Message* reply, const proto::HeldCopy* held = nullptr);
  // Server `rank` came back with `held`: each range that lost every replica,
  // waits for its rebuild, and that the copy holds whole and fresher than the
  // latest checkpoint (the server left after that checkpoint was committed)
  // is handed to it (RangeChains::Hand). Only if every range `rank` would
  // then hold alone is in the copy: else nothing changes and the checkpoint
  // rebuilds them as before. Fills `reply` to restore from the copy and
  // returns the ranges rebuilt from it.
  std::vector<size_t> UseHeldCopy(int rank, const proto::HeldCopy& held, Message* reply);
  // Why a server registering anew for `rank` waits ("" if it need not): a
  // range it would rebuild from the checkpoint (it held it alone) waits,
  // until rebuild_wait_s after its loss, for a former holder of another rank
  // that may come back with its copy. `held`: the copy it brings, if any.
  std::string RebuildWait(int rank, const proto::HeldCopy* held) const;
  // Answers a registration with `reason` on the connection it came on.
  // `log`: say so in the log (a refusal repeated while a node waits is said
  // once by the caller).
  // `replaced`: the node was replaced and must not register as itself again
  // (Meta.replaced).
  void Refuse(const Message& request, const std::string& reason, bool log = true,
              bool replaced = false);
  // A REGISTER repeated on the route of the member it admitted (the node
  // asked again before its answer came): answered as the first one was.
  // False if the request is not such a repeat. O(1): members are found by
  // their route (routes_), not by a scan (a storm of N REGISTERs scanned
  // N^2 / 2 members).
  bool AnswerAgain(const Message& request);
  // A node of an earlier run registered again: what it knows of that run
  // (its view, the tagged barriers it passed, a worker's cursor and the
  // latest epoch whose end it heard) goes into the scheduler's state.
  void TakeEarlierRun(const proto::Meta& request, int rank);
  // Before a restarted scheduler's first view: each node that registered
  // anew replaces its rank's holder in the view the other nodes brought back,
  // which did not register again and so departs now (a worker's rank resumes
  // at the job's current epoch, a server copies its ranges or restores them);
  // the node gets its REGISTER answer again, as a replacement.
  void ReplaceEarlierHolders();
  // Whether `node`, a worker of an earlier run registering again with a
  // restarted scheduler, finds its rank taken by another node: it was
  // replaced (its rank went to a new node before the first view), and is
  // told to leave.
  bool ReplacedWhileAway(const proto::NodeInfo& node, const std::set<int>& taken) const;

  ClusterState* const cluster_;
  MembershipLog* const membership_;
  BarrierTable* const barriers_;
  OrphanedShares* const shares_;
  Resharding* const resharding_;
  Hooks hooks_;
  const double rebuild_wait_s_;
  std::unique_ptr<RegistrationProbes> probes_;  // checks of registering nodes' addresses
  int next_id_;                                 // the next fresh node id
  std::string last_rebuild_wait_;               // the latest RebuildWait refusal, said once
  // The newest view the nodes of an earlier run brought back (epoch 0: none;
  // the scheduler was not restarted, or none of them registered again yet);
  // a server's whole view over a worker's form of the same epoch. In the
  // workers' form no worker is listed, so an earlier worker holder of a rank
  // is known only when a server brought that view back; otherwise its rank
  // is taken over as one left before this scheduler started.
  proto::ClusterView earlier_view_;
  // Member ids by the route their REGISTER came on (Member::route). An entry
  // outlives its member: checked against cluster_->members when found, and
  // dropped then, or at an admission when the entries are more than twice
  // the members and 64.
  std::unordered_map<std::string, int> routes_;
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_REGISTRATION_H_
