// Resharding: servers joining the running job (--join) and drained from it
// (DRAIN), their key ranges moving while pushes go on (see RangeChains for
// how a move runs).
//
// A joining server takes ranges from the servers holding the most; a drained
// one hands each of its ranges to another server and, once none is left on
// it, is told to shut down and leaves the view. It takes the DRAIN requests
// (an admin client's, or Scheduler::Drain), changes the scheduler's state it
// is given (the members, the chains, the server ranks and count, the removed
// and vacant servers), records in its membership log, and has the scheduler
// publish the views that follow and forget a released server in its barriers
// and replies (its hooks).
//
// Not synchronized: the scheduler calls it under its lock.
#ifndef KEEL_SCHEDULER_RESHARDING_H_
#define KEEL_SCHEDULER_RESHARDING_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "keel.pb.h"
#include "kv/message.h"
#include "scheduler/cluster_state.h"
#include "scheduler/members.h"
#include "scheduler/membership_log.h"
#include "scheduler/range_chains.h"

namespace keel {

class Resharding {
 public:
  struct Hooks {
    // Sends a control message to a node (the scheduler stamps it).
    std::function<void(int node_id, Message& message)> send;
    // Answers `request` on the connection it came on.
    std::function<void(const Message& request, Message& reply)> reply;
    // Publishes the next view to every member.
    std::function<void()> publish_view;
    // Server node `id` was released (drained, it left the view): the
    // barriers and the awaited replies forget it.
    std::function<void(int id)> forget;
    // Wakes whoever waits on the scheduler's state (after a drain's view).
    std::function<void()> notify;
  };

  // `cluster`: the scheduler's state it reads and changes; `membership`: the
  // scheduler's, told of drains and of the servers they release (both
  // outlive this object). `secured`: the cluster has a secret (CURVE), so
  // DRAIN is taken from any host; without one only from the scheduler's own.
  Resharding(ClusterState* cluster, MembershipLog* membership, Hooks hooks, bool secured);

  // Server ranks being drained.
  const std::set<int>& draining() const { return draining_; }
  // A restarted scheduler takes them from `view`, the latest its nodes
  // brought back (at most kMaxServerRank of them, each within 0 ..
  // kMaxServerRank).
  void RestoreDraining(const proto::ClusterView& view);
  // The ranks key ranges may be homed on: live servers, not those being
  // drained.
  std::set<int> HomeRanks() const;

  // A server registered with --join: the key ranges homed on it now (one
  // server more expected).
  void Join(const Member& member);
  // DRAIN from `request`'s sender (an admin client: no member), answered on
  // its connection with the refusal, if any.
  void OnRequest(const Message& request);
  // Drains server `rank` (`who` asked, for the log; `loopback`: the request
  // came from this host): its ranges move to the other home ranks, and a
  // view goes out. Returns "" if the drain started (or was under way
  // already), else why not.
  std::string Drain(int rank, const std::string& who, bool loopback);
  // After a copy arrived, or a departure: ranges whose new replicas all have
  // their rows drop the servers they moved off, and drained servers that hold
  // nothing any more leave (told to shut down, then forgotten); if anything
  // changed, a view goes out.
  void AdvanceMoves();

 private:
  // Starts draining server `rank`: returns "" and sets `started` if the drain
  // started, "" if it was under way already, else why not.
  std::string StartDrain(int rank, const std::string& who, bool* started);
  // Drained server `rank` leaves the view; returns its node id (-1: none).
  int ReleaseDrained(int rank);

  ClusterState* const cluster_;
  MembershipLog* const membership_;
  Hooks hooks_;
  const bool secured_;
  std::set<int> draining_;  // server ranks being drained
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_RESHARDING_H_
