// A cluster in one process over loopback for the tests that drive one: a
// scheduler on 127.0.0.1, its servers (a Node and a KVServer each) and a
// worker (a Node and a KVWorker), as objects a test makes and reaches into.
// LocalScheduler and StartScheduler make the scheduler, StartNodes starts
// nodes together (each Start blocks until the whole cluster has registered),
// and the fixtures ClusterTest (servers and one worker) and
// OneServerClusterTest (one server, several workers) hold the usual sets and
// stop them at the end.
#ifndef KEEL_TESTS_CLUSTER_FIXTURE_H_
#define KEEL_TESTS_CLUSTER_FIXTURE_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "kv/keys.h"
#include "kv/kv_worker.h"
#include "kv/node.h"
#include "scheduler/scheduler.h"
#include "server/kv_server.h"

namespace keel::testing {

// Options for a scheduler on 127.0.0.1 that waits for `servers` servers and
// `workers` workers (the rest at their defaults, for the caller to change).
SchedulerOptions LocalScheduler(int servers, int workers);

// A scheduler made with `options`, started.
std::unique_ptr<Scheduler> StartScheduler(const SchedulerOptions& options);

// Starts every node of `nodes` at once: each but the last on a thread of its
// own, the last on this one; returns once all have started, or throws the
// first node's error (a registration that timed out) once all have returned.
void StartNodes(const std::vector<Node*>& nodes);

// Retries that wait `timeout_s` after the first send, at most `max_timeout_s`
// after a later one, and send `max_attempts` times in all.
RequestRetry Retries(double timeout_s, double max_timeout_s, int max_attempts);

// Retries for a worker that resends soon and often (0.2 s, 100 sends): for
// clusters whose servers come and go under it.
RequestRetry PatientRetry();

// A scheduler, servers and one worker, made by the test (SetUp or the test
// itself); TearDown stops whatever of them exists (the worker, then the
// servers, then the scheduler) and destroys them in that order, before the
// members of a derived fixture that they may report into.
class ClusterTest : public ::testing::Test {
 protected:
  void TearDown() override;

  // Makes the worker's node (heartbeats every `heartbeat_interval_s`) and its
  // client, resending after `retry`; StartAll starts it.
  void MakeWorker(double heartbeat_interval_s = 1, const RequestRetry& retry = RequestRetry());

  // Makes `servers` more servers (a node and a KVServer each; SGD at rate 1
  // on rows starting at 0, so a push of g subtracts g); StartAll starts them.
  void MakeSumServers(int servers);

  // Starts a scheduler for `servers` servers, `replication` backups per key
  // range and one worker, at a heartbeat timeout of 0.5 s (a stopped server
  // leaves soon), and makes room for the servers the test then makes.
  void StartReplicatedScheduler(int servers, int replication);

  // Starts every server node that exists and the worker's node.
  void StartAll();

  // The server node serving `key`.
  int ServerRankOf(Key key) const;

  // The server of `rank` dies: its KVServer and node go, so its heartbeats
  // stop.
  void StopServer(int rank);

  // Waits (at most 20 s) until the worker's view gives every range the
  // chain `chain`.
  bool ChainsBecome(const std::vector<int>& chain);

  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<Node>> server_nodes_;
  std::vector<std::unique_ptr<KVServer>> servers_;
  std::unique_ptr<Node> worker_node_;
  std::unique_ptr<KVWorker> client_;
};

// Servers that replicate their ranges, each an SGD of rate 1 on rows of
// kWidth (a push of g subtracts g), and one worker that heartbeats every
// 0.1 s and resends soon and often (PatientRetry): for the tests of what
// outlives a server's departure and return.
class ReplicatedClusterTest : public ClusterTest {
 public:
  static constexpr int kWidth = 2;

 protected:

  // Makes the worker's client for its node, resending after the retry given.
  using MakeClient = std::function<std::unique_ptr<KVWorker>(Node*, const RequestRetry&)>;

  // Starts a scheduler with `options` (LocalScheduler(servers, 1) as the
  // test changed it), makes its servers (MakeServer) and the worker (its
  // client made by `make_client`; null: a KVWorker), and starts them.
  void StartServersAndWorker(const SchedulerOptions& options,
                             const MakeClient& make_client = nullptr);

  // Makes the node and KVServer of `rank` (pages of page_bytes_, if set).
  void MakeServer(int rank);

  // Starts a server taking `rank` back (Start returns once it has a view).
  void RestartServer(int rank);

  // Pushes `times` gradients of 1, 2 (by column) for every key of `keys`,
  // one after the other.
  void Push(const std::vector<Key>& keys, int times);

  // The rows of `keys`, kWidth floats each.
  std::vector<float> Pull(const std::vector<Key>& keys);

  // The mixed keys of features 0 .. features - 1: spread over every range.
  static std::vector<Key> SpreadKeys(uint64_t features);

  // DUMP answers' and range copies' pages (0: the servers' default).
  size_t page_bytes_ = 0;
};

// One server and several workers, as the server's own behaviour wants:
// heartbeats every 0.2 s and a scheduler's timeout of 1 s, so that a stopped
// worker leaves the view within seconds.
class OneServerClusterTest : public ::testing::Test {
 protected:
  // Starts the scheduler, makes the server's node and then its KVServer with
  // `make_server`, and `workers` workers resending after `retry`; returns
  // once every node has started. `key_ranges`: the server's ranges (0: one).
  void StartCluster(int workers, const std::function<std::unique_ptr<KVServer>(Node*)>& make_server,
                    const RequestRetry& retry = RequestRetry(), int key_ranges = 0);

  // Stops the workers, the server and the scheduler, and destroys them in
  // that order.
  void TearDown() override;

  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Node> server_node_;
  std::unique_ptr<KVServer> server_;
  std::vector<std::unique_ptr<Node>> worker_nodes_;
  std::vector<std::unique_ptr<KVWorker>> clients_;
};

}  // namespace keel::testing

#endif  // KEEL_TESTS_CLUSTER_FIXTURE_H_
