// The metrics of each role, each defined in one place (role_metrics.cc) so
// their names are easy to review; docs/guide/operations.md ("Every
// metric") lists them all. Every function registers its role's metrics on
// `registry`, reading the objects given, which must outlive every later
// scrape (stop the endpoint first). Label sets are bounded by the cluster's
// size and the job's tables.
#ifndef KEEL_METRICS_ROLE_METRICS_H_
#define KEEL_METRICS_ROLE_METRICS_H_

#include "kv/kv_worker.h"
#include "kv/node.h"
#include "metrics/metrics_registry.h"
#include "scheduler/scheduler.h"
#include "server/kv_server.h"
#include "worker/training_counters.h"

namespace keel {

// Every server's and worker's membership: view epoch, scheduler contact,
// messages the node dropped. keel_node_*.
void AddNodeMetrics(const Node* node, MetricsRegistry* registry);

// A server's requests, refusals, tables and replication, keel_server_*.
// Installs `server`'s request observer: call before the node starts.
void AddServerMetrics(KVServer* server, MetricsRegistry* registry);

// A worker's training figures, request latencies, resends and staleness,
// keel_worker_*. Installs `client`'s request observer: call before the node
// starts. `counters` may be null (a job that is not training).
void AddWorkerMetrics(KVWorker* client, const TrainingCounters* counters,
                      MetricsRegistry* registry);

// The scheduler's view, members, heartbeats and checkpoints, keel_scheduler_*.
// Members up to which the scheduler exports a series per member
// (keel_scheduler_heartbeat_age_seconds); beyond, its series are per role.
constexpr size_t kMemberSeries = 256;

void AddSchedulerMetrics(const Scheduler* scheduler, MetricsRegistry* registry);

// The label value of a request's command: "push" or "pull".
const char* OperationLabel(proto::Command command);

}  // namespace keel

#endif  // KEEL_METRICS_ROLE_METRICS_H_
