// ClusterState: what the scheduler knows of the cluster and its mechanisms
// (Registration, Departures, Resharding) read and change: the members and the
// ranks given out, the servers and workers expected, the view, the key
// ranges' chains and the ranges lost, the workers done, and the nodes that
// left (removed, vacant server ranks, former holders).
//
// Plain data, not synchronized: the Scheduler owns it and passes it by
// pointer; it and its mechanisms read and change it under its lock.
#ifndef KEEL_SCHEDULER_CLUSTER_STATE_H_
#define KEEL_SCHEDULER_CLUSTER_STATE_H_

#include <map>
#include <set>
#include <string>

#include "keel.pb.h"
#include "scheduler/lost_ranges.h"
#include "scheduler/members.h"
#include "scheduler/range_chains.h"

namespace keel {

struct ClusterState {
  // The job's start: `num_servers` and `num_workers` expected, the key ranges
  // as RangeChains makes them.
  ClusterState(int num_servers, int num_workers, int replication, int key_ranges)
      : num_servers(num_servers),
        num_workers(num_workers),
        chains(num_servers, replication, key_ranges) {}

  Members members;
  std::set<int> server_ranks, worker_ranks;  // ranks given out
  // Servers expected in the view: the start's, plus those that joined, less
  // those drained (a restarted scheduler takes the latest view's).
  int num_servers;
  const int num_workers;  // workers expected
  // The latest view (a node of an earlier run raises its epoch to the one it
  // brings).
  proto::ClusterView view;
  bool published = false;               // a view has gone out
  bool shut_down = false;               // SHUTDOWN went to every node: the job is over
  RangeChains chains;                   // each key range's replica chain
  LostRanges lost;                      // ranges that lost every replica (marked in every view)
  std::map<int, std::string> done;      // worker node id -> error ("" on success)
  std::map<int, std::string> removed;   // nodes removed from the view: why
  std::map<int, double> server_vacant;  // server rank -> when its server left
  // Servers removed for silence whose process may come back with their copy.
  FormerHolders former_holders;
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_CLUSTER_STATE_H_
