// RangeChains: the key ranges and their replica chains, as the scheduler
// changes them while servers leave and come back, join and are drained.
//
// The chains start as RangeMap::Even(num_servers, replication, num_ranges) at
// the first view (or come from a node that rejoins a restarted scheduler).
// Each range also has a home: the servers it is meant to be on. A server that
// leaves drops out of every chain it is in: the next replica takes its place,
// a backup being promoted where it was the primary. A range left without a
// replica that holds its rows keeps the departed rank alone as its primary, to
// wait for a server started again with that rank. A server that (re)joins a
// chain copies the range from its predecessor and is marked "copying" until it
// reports the copy arrived (REPLICA_SYNC); a copying replica is never the one
// left holding a range.
//
// Live resharding moves homes: a server that joins (Join) takes ranges from
// the servers holding the most, and a drained one (Drain) hands each of its
// ranges to the server holding the fewest. A live server a range's home
// gained by a move first copies the range from the chain's end without
// joining it (pre-copy: pushes go on as before); once that copy arrived it
// joins the chain's end, copying (Repair), and needs only the rows changed
// since, while the pushes passed down to it wait. Once no replica of the
// range is copying, the members its home lost leave its chain (Trim). A move
// is thus a chain join followed by a leave, and the at-most-once records
// travel with the copy.
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

  // Requires 0 <= replication < num_servers <= num_ranges (0: num_servers;
  // RangeMap::Even checks it).
  RangeChains(int num_servers, int replication, int num_ranges = 0);

  int num_ranges() const { return num_ranges_; }
  // Whether a moving range is copied before its new server joins the chain
  // (true unless set; benchmarks compare).
  void set_precopy(bool precopy) { precopy_moves_ = precopy; }

  // Whether the job has chains yet: a view went out, or a rejoining node
  // brought the ones it knew.
  bool started() const { return epoch_ > 0; }

  // Takes the chains of `known`, a view a node of an earlier scheduler run
  // brings, if it is newer than the chains held and has ranges. Throws Error
  // (and changes nothing) if its ranges do not fit the job (CheckFits).
  void Adopt(const proto::ClusterView& known);
  // Throws Error naming the first problem unless `known`'s ranges (if any)
  // are well formed and could have come from this job: the same ranges as at
  // the start, each chain made of server ranks below kMaxServerRank. Its
  // chains become the homes (servers may have joined or been drained).
  void CheckFits(const proto::ClusterView& known) const;

  // Server `rank` left: each chain closes over the gap (see above).
  Departure RemoveServer(int rank);

  // Gives every range whose primary is in `live_ranks` the live servers of
  // its home it lacks, at the end of its chain, each to copy the range from
  // its predecessor (marked copying). Returns what it added.
  Additions Repair(const std::set<int>& live_ranks);

  // Live resharding. `ranks`: every server rank the homes may use (live and
  // vacant, without those being drained). Each returns the ranges whose home
  // changed.
  // Server `rank` joins: homes are rebalanced so that every rank in `ranks`
  // (which includes it) holds as many range replicas as any other, to one.
  // Throws Error (changing nothing) if there are fewer ranges than ranks.
  std::vector<size_t> Join(int rank, const std::set<int>& ranks);
  // Server `rank` is drained: each range homed on it is homed instead on the
  // rank of `ranks` (which lacks it) holding the fewest, then homes are
  // rebalanced. Throws Error (changing nothing) if `ranks` has too few
  // servers for a range's replicas.
  std::vector<size_t> Drain(int rank, const std::set<int>& ranks);
  // Each range whose home's members are all in its chain and none copying
  // sheds the chain members its home lacks. Returns (range, rank) removed.
  std::vector<std::pair<size_t, int>> Trim();
  // Whether any chain or home names `rank`.
  bool Names(int rank) const;
  // Ranges whose chain differs from their home (a move under way).
  size_t Moving() const;

  // The ranges whose chain is `rank` alone.
  std::vector<size_t> HeldAlone(int rank) const;
  // The ranges whose chain has `rank` as a whole replica (not copying).
  std::vector<size_t> WholeReplicas(int rank) const;
  // `range`, which lost every replica and waits alone for a departed rank,
  // is held by `rank` alone from now on (its primary, not copying: it
  // restores the rows itself). Its home is unchanged, so the departed rank
  // copies it back when it returns. Throws Error (and changes nothing) unless
  // the range exists and its chain is one rank (the departed one, or `rank`).
  void Hand(size_t range, int rank);
  // The ranges `rank` started on but is not in the chain of now.
  std::vector<size_t> Missing(int rank) const;

  // Server `rank` reports its pre-copy of `range` arrived: it joins the
  // chain's end at the next view, to copy what changed since. Throws Error
  // (and changes nothing) unless `rank` was pre-copying `range`.
  void Precopied(size_t range, int rank);

  // Server `rank` reports its copy of `range` arrived: it counts as a replica.
  // Throws Error (and changes nothing) unless `range` exists and `rank` is
  // copying it.
  void Synced(size_t range, int rank);

  // The chains for a new view (`view->epoch()` already set): made on the first
  // one, repaired with `live_ranks` (a no-op but after a scheduler restart that
  // missed a replacement), and written with the replicas still copying.
  void ToView(const std::set<int>& live_ranks, proto::ClusterView* view);

 private:
  // A server's report that its copy of `range` arrived: takes `rank` out of
  // `from`'s set for the range, or throws Error (`doing`: what it should be
  // doing, for the message).
  void TakeReport(size_t range, int rank, std::map<size_t, std::set<int>>* from,
                  const char* doing);
  // Rebalances homes over `ranks` (see Join), recording changed ranges.
  void Balance(const std::set<int>& ranks, std::set<size_t>* changed);
  // Replicas each rank of `ranks` holds in the homes.
  std::map<int, int> HomeCounts(const std::set<int>& ranks) const;

  int num_servers_;
  bool precopy_moves_ = true;
  const int replication_;
  const int num_ranges_;
  const RangeMap start_;  // the chains of the first view (every view's begins)
  RangeMap ranges_;
  // Per range, the servers it is meant to be on; a view names them only
  // where they are not the range's chain (primary, then backups) as it is.
  RangeMap home_;
  uint64_t epoch_ = 0;  // the view epoch `ranges_` came from
  // Per range: ranks its home gained by a move (Join, Drain), which copy it
  // before they join its chain (pre-copy), those copying it so, and those
  // whose pre-copy arrived.
  std::map<size_t, std::set<int>> moves_, precopy_, precopied_;
  // Per range: ranks that joined its chain and have not yet reported that its
  // copy arrived. They are not promoted in place of the last replica that
  // holds the rows.
  std::map<size_t, std::set<int>> copying_;
};

// The largest server rank a view may name.
constexpr int kMaxServerRank = 65535;

// `ranges` as "0, 2, 5", for messages.
std::string JoinRanges(const std::vector<size_t>& ranges);

}  // namespace keel

#endif  // KEEL_SCHEDULER_RANGE_CHAINS_H_
