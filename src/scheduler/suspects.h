// Suspects: members whose connection closed, each checked with a direct
// probe of its address before the scheduler may remove it.
//
// The scheduler's send socket to a node sees the connection close when the
// node's process dies (its kernel closes it at once), but also on a network
// blip or a restart, after which libzmq reconnects. So a closed connection
// only makes the node a suspect: a probe of its advertised address
// (ProbeNode: a CURVE handshake with the cluster's secret, else a TCP
// connection) tells a dead process, whose port refuses connections, from a
// live one, which answers, and from a host that does not answer in time
// (stopped, overloaded or cut off: left to the heartbeats).
//
// A process being killed closes its sockets one by one as its kernel tears
// it down: the scheduler's connection may close a moment before its
// listening socket does, and a probe in that moment is still accepted (by
// the kernel, on the dying socket's backlog). So a suspect that answers is
// probed again after kRetryDelays (0.05, 0.2 and 0.75 s later): it is
// cleared only if every probe got through, and dead as soon as one is
// refused. Probes run on a fixed pool of threads (base/work_queue.h), at
// most one per node at a time, so the queue holds at most one entry per
// member; a suspect waiting for its next probe holds no thread.
//
// Thread-safe. The callback runs on a probe thread.
#ifndef KEEL_SCHEDULER_SUSPECTS_H_
#define KEEL_SCHEDULER_SUSPECTS_H_

#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "base/work_queue.h"
#include "kv/cluster_secret.h"
#include "kv/van.h"

namespace keel {

class Suspects {
 public:
  static constexpr int kThreads = 2;
  // Waits before the probes after the first, each counted from the end of
  // the one before.
  static constexpr double kRetryDelays[] = {0.05, 0.2, 0.75};

  // Called once per suspect: its node id, the address probed and what the
  // probes found (the refused one, or the last).
  using Probed =
      std::function<void(int node_id, const std::string& address, const AddressProbe& probe)>;

  // `probe_timeout_s`: how long a probe may wait for an answer. `secret`:
  // the cluster's, if it has one. `network`: the in-process transport whose
  // addresses are probed instead of TCP ones (nullptr: TCP).
  Suspects(double probe_timeout_s, std::optional<ClusterSecret> secret,
           const MemoryNetwork* network, Probed probed);
  ~Suspects();  // Stop()
  Suspects(const Suspects&) = delete;
  Suspects& operator=(const Suspects&) = delete;

  // Queues the probes of node `node_id` at `address`; false (nothing queued)
  // if that node's are queued or under way already, or after Stop.
  bool Add(int node_id, const std::string& address);
  // Drops what waits, lets the probes under way finish and joins the
  // threads (their callbacks run); idempotent.
  void Stop();

 private:
  struct Suspect {
    int node_id;
    std::string address;
    size_t probes;  // done so far
  };

  // Probes `suspect` and counts the probe; true once it has its outcome (and
  // the callback ran).
  bool Probe(Suspect& suspect);

  const double probe_timeout_s_;
  const std::optional<ClusterSecret> secret_;
  const MemoryNetwork* const network_;
  const Probed probed_;
  std::mutex mutex_;
  std::set<int> pending_;       // node ids waiting or being probed
  WorkQueue<Suspect> waiting_;  // last: its threads use the members above
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_SUSPECTS_H_
