// Each role's health probes for its metrics endpoint (/healthz, /readyz):
// what "alive" and "ready" mean for a scheduler, a server and a worker. Each
// Probe reads the objects given, which must outlive the endpoint's serving.
#ifndef KEEL_METRICS_ROLE_PROBES_H_
#define KEEL_METRICS_ROLE_PROBES_H_

#include "kv/node.h"
#include "metrics/metrics_endpoint.h"
#include "scheduler/scheduler.h"
#include "server/kv_server.h"

namespace keel {

// A probe's loop counts as stalled after this many of its periods (and at
// least kMinStallSeconds) without a round.
constexpr double kStalledPeriods = 5;
constexpr double kMinStallSeconds = 10;

// Alive while the scheduler's failure-detection loop keeps running (it runs
// every second).
Probe SchedulerLive(const Scheduler* scheduler);
// Ready once the first view is published (every expected node registered).
Probe SchedulerReady(const Scheduler* scheduler);

// Alive while the node's heartbeat loop keeps running (every
// `heartbeat_interval_s`), whether or not the scheduler answers: a job keeps
// training while its scheduler restarts. Stalled after kStalledPeriods
// periods, and at least `min_stall_s`.
Probe NodeLive(const Node* node, double heartbeat_interval_s,
               double min_stall_s = kMinStallSeconds);
// A server is ready once it is in the view and every key range it holds has
// its rows (copied from its chain or loaded from a checkpoint).
Probe ServerReady(const Node* node, const KVServer* server);
// A worker is ready once it is in the view with a rank (which gives it its
// data shard) and has not been dropped from it.
Probe WorkerReady(const Node* node);

}  // namespace keel

#endif  // KEEL_METRICS_ROLE_PROBES_H_
