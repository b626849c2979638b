// RangeChains: the key ranges and their replica chains, as the scheduler
// changes them while servers leave and come back.
//
// The chains start as RangeMap::Even(num_servers, replication) at the first
// view (or come from a node that rejoins a restarted scheduler). A server that
// leaves drops out of every chain it is in: the next replica takes its place,
// a backup being promoted where it was the primary. A range left without a
// replica that holds its rows keeps the departed rank alone as its primary, to
// wait for a server started again with that rank. A server that (re)joins a
// chain copies the range from its predecessor and is marked "copying" until it
// reports the copy arrived (REPLICA_SYNC); a copying replica is never the one
// left holding a range.
//
// Not synchronized: the scheduler calls it under its lock.
#ifndef KEEL_SCHEDULER_RANGE_CHAINS_H_
#define KEEL_SCHEDULER_RANGE_CHAINS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "keel.pb.h"
#include "kv/keys.h"

namespace keel {

class RangeChains {
 public:
  // What a server's departure did to the chains.
  struct Departure {
    std::vector<std::pair<size_t, int>> promoted;  // (range, its new primary's rank)
    std::vector<size_t> alone;  // ranges no other replica holds, waiting for the rank
  };
  // Per server rank added to chains: (range, the predecessor it copies from).
  using Additions = std::map<int, std::vector<std::pair<size_t, int>>>;

  // Requires 0 <= replication < num_servers (RangeMap::Even checks it).
  RangeChains(int num_servers, int replication);

  // Whether the job has chains yet: a view went out, or a rejoining node
  // brought the ones it knew.
  bool started() const { return epoch_ > 0; }

  // Takes the chains of `known`, a view a node of an earlier scheduler run
  // brings, if it is newer than the chains held and has ranges. Throws Error
  // (and changes nothing) if its ranges do not fit the job (CheckFits).
  void Adopt(const proto::ClusterView& known);
  // Throws Error naming the first problem unless `known`'s ranges (if any)
  // are well formed and could have come from this job: the same ranges as at
  // the start, each chain made of servers the range started on.
  void CheckFits(const proto::ClusterView& known) const;

  // Server `rank` left: each chain closes over the gap (see above).
  Departure RemoveServer(int rank);

  // Gives every range whose primary is in `live_ranks` the live servers it
  // started on and lacks, at the end of its chain, each to copy the range from
  // its predecessor (marked copying). Returns what it added.
  Additions Repair(const std::set<int>& live_ranks);

  // The ranges whose chain is `rank` alone.
  std::vector<size_t> HeldAlone(int rank) const;
  // The ranges `rank` started on but is not in the chain of now.
  std::vector<size_t> Missing(int rank) const;

  // Server `rank` reports its copy of `range` arrived: it counts as a replica.
  // Throws Error (and changes nothing) unless `range` exists and `rank` is
  // copying it.
  void Synced(size_t range, int rank);

  // The chains for a new view (`view->epoch()` already set): made on the first
  // one, repaired with `live_ranks` (a no-op but after a scheduler restart that
  // missed a replacement), and written with the replicas still copying.
  void ToView(const std::set<int>& live_ranks, proto::ClusterView* view);

 private:
  const int num_servers_;
  const int replication_;
  RangeMap ranges_;
  uint64_t epoch_ = 0;  // the view epoch `ranges_` came from
  // Per range: ranks that joined its chain and have not yet reported that its
  // copy arrived. They are not promoted in place of the last replica that
  // holds the rows.
  std::map<size_t, std::set<int>> copying_;
};

// `ranges` as "0, 2, 5", for messages.
std::string JoinRanges(const std::vector<size_t>& ranges);

}  // namespace keel

#endif  // KEEL_SCHEDULER_RANGE_CHAINS_H_
