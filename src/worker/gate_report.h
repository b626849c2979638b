// The staleness gate's report at the end of a training job: how long workers
// sat blocked on their pulls, how many pulls the servers held, and the
// staleness the pulls observed, summed over every worker.
#ifndef KEEL_WORKER_GATE_REPORT_H_
#define KEEL_WORKER_GATE_REPORT_H_

#include <cstdint>

#include "kv/kv_worker.h"
#include "kv/node.h"
#include "models/metrics.h"
#include "worker/control_table.h"

namespace keel {

// Every worker adds its gate figures (client->gate_stats()) and its training
// and pull-wait seconds to `control`, then meets the others at a worker
// barrier. Worker 0 then reads the sums into the train:* metrics of `metrics`
// (`staleness`: the job's --staleness, recorded too) and prints one line for
// people. Throws Error if a request or the barrier fails.
void ReportGate(Node* node, KVWorker* client, ControlTable* control, int64_t staleness,
                double training_seconds, double pull_wait_seconds, MetricSet* metrics);

}  // namespace keel

#endif  // KEEL_WORKER_GATE_REPORT_H_
