// Departures: members leaving the cluster view, and what each departure
// changes.
//
// A member leaves when it is silent past the heartbeat timeout, or at once
// when its connection closes and its address refuses connections (its
// process died); FailureDetector judges both, and Suspects (owned here, with
// the detector) probes the members whose connection closed. A node of an
// earlier run of a restarted scheduler that a new node replaced leaves too.
// A worker that leaves leaves its rank vacant for a replacement
// (OrphanedShares); a server that leaves is closed over in each key range's
// chain (a backup promoted where it was the primary), and a range it held
// alone is declared lost (LostRanges) until its rank is started again. A
// server removed for silence may still run: it is remembered as a
// FormerHolder that may come back with its copy.
//
// It changes the scheduler's state it is given (ClusterState) and calls
// nothing of the scheduler but its Hooks: disconnecting a node, what follows
// any departure (barriers and replies forget it, a new view goes out),
// advancing the drains' moves, and the latest checkpoint.
//
// Not synchronized: the scheduler calls it under its lock, from its receive
// thread, its monitor loop, the registration probes and the suspects' probe
// threads (whose callback is the scheduler's, which takes its lock).
#ifndef KEEL_SCHEDULER_DEPARTURES_H_
#define KEEL_SCHEDULER_DEPARTURES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "keel.pb.h"
#include "kv/van.h"
#include "scheduler/cluster_state.h"
#include "scheduler/failure_detector.h"
#include "scheduler/lost_ranges.h"
#include "scheduler/members.h"
#include "scheduler/membership_log.h"
#include "scheduler/orphaned_shares.h"
#include "scheduler/range_chains.h"
#include "scheduler/suspects.h"

namespace keel {

class Departures {
 public:
  struct Hooks {
    // Closes the scheduler's connection to node `id` (what it still sends is
    // answered on its own connection).
    std::function<void(int id)> disconnect;
    // What follows any departure of node `id`: barriers and checkpoints stop
    // waiting for it, and a new view goes out.
    std::function<void(int id)> after_departure;
    // A drain's move may wait on a departed server no more.
    std::function<void()> advance_moves;
    // The newest committed checkpoint ("" none) and its `uri`.
    std::function<std::string(std::string* uri)> latest_checkpoint;
  };

  // `heartbeat_timeout_s`: a member silent this long leaves. `replication`:
  // the job's backups per key range (for the log). `suspects`: probes of
  // members whose connection closed (nullptr: only heartbeats detect
  // failures); their callback calls OnSuspectProbed under the scheduler's
  // lock.
  // `cluster`: the scheduler's state it reads and changes; `membership` and
  // `shares`: the scheduler's, told of the departures (each outlives this
  // object).
  Departures(ClusterState* cluster, MembershipLog* membership, OrphanedShares* shares, Hooks hooks,
             double heartbeat_timeout_s, int replication, std::unique_ptr<Suspects> suspects);

  // A member was heard from at `now` (any message on its connection).
  void HeardFrom(int id, Member& member, double now);
  // The first view goes out at `now`: silence counts from then.
  void StartClocks(double now) { detector_.StartClocks(now); }
  // When the monitor is to look next (FailureDetector::NextDeadline).
  double NextDeadline(double now) const { return detector_.NextDeadline(now); }
  // The monitor's round at `now`, due at `due`: removes the members silent
  // past the timeout, judged as of `caught_up_at` (when the receive thread
  // last had read every message that had arrived), by at most a heartbeat
  // timeout.
  void MonitorRound(double now, double due, double caught_up_at);
  // The connection to node `id` closed: a member not done nor at the job's
  // end becomes a suspect (Suspects probes it).
  void OnConnectionClosed(int id);
  // Node `id`, a suspect, was probed at `address`: it leaves the view if
  // FailureDetector::Judge says so.
  void OnSuspectProbed(int id, const std::string& address, const AddressProbe& probe);
  // Removes member `id` for `reason` (nothing if it is gone already).
  // `may_return`: it left for silence, so its process may be alive (paused,
  // cut off) and come back with its copy (FormerHolder).
  void Remove(int id, const std::string& reason, bool may_return = false);
  // `holder`, a member of an earlier run's view that did not register again,
  // leaves the cluster for `reason` as if found dead.
  void DepartEarlierHolder(const proto::NodeInfo& holder, const std::string& reason);
  // Stops the suspects' probes (joining their threads); call without the
  // scheduler's lock.
  void Stop();

  // See SchedulerStatus.
  uint64_t deaf_spells() const { return detector_.deaf_spells(); }
  uint64_t suspected() const { return detector_.suspected(); }
  uint64_t suspects_cleared() const { return detector_.suspects_cleared(); }

 private:
  // A worker that left leaves the view: its barriers stop waiting for it,
  // and its rank waits for a replacement (OrphanedShares).
  void RemoveWorker(int id, const std::string& reason);
  // A server that left leaves the view: in each key range's chain the next
  // replica takes its place. A range it held alone waits for a server started
  // again with its rank, which restores it from the latest checkpoint.
  void RemoveServer(int id, const std::string& reason, bool may_return);
  // `holder`, a server that left, was the last replica of `ranges`: each is
  // declared lost (LostRanges) in the log and the membership log, with what
  // `holder`'s last report (if any) said the range held.
  void DeclareLost(const std::vector<size_t>& ranges, const proto::NodeInfo& holder,
                   const Member* last_report = nullptr);

  ClusterState* const cluster_;
  MembershipLog* const membership_;
  OrphanedShares* const shares_;
  Hooks hooks_;
  const double heartbeat_timeout_s_;
  const int replication_;
  FailureDetector detector_;  // judges silence and suspects
  std::unique_ptr<Suspects> suspects_;
  bool lagging_ = false;  // judging as of a bound (logged once a spell)
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_DEPARTURES_H_
