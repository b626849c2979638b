// The exact_sum job: a built-in check that the cluster loses no update and
// applies none twice, under whatever faults the run injects.
//
// Every worker pushes its share of every epoch (exact_sum_check.h says what),
// keeping a ledger of what it sent and what was acknowledged
// (exact_sum_ledger.h) in <model_dir>/exact_sum_ledgers/. A worker that takes
// over a departed worker's rank goes on from that rank's last progress
// report; the shares of ranks left without a replacement are handed out by
// the scheduler at the end of each epoch (ORPHANS) and pushed by the others
// under the departed rank's name. When every share of every epoch is pushed,
// worker 0 dumps the table, computes the sums every ledger allows, compares
// them key by key, prints the outcome and writes <model_dir>/exact_sum.json.
#ifndef KEEL_WORKER_EXACT_SUM_JOB_H_
#define KEEL_WORKER_EXACT_SUM_JOB_H_

#include <map>
#include <ostream>
#include <string>

#include "kv/kv_worker.h"
#include "kv/node.h"
#include "kv/table_spec.h"
#include "worker/exact_sum_check.h"
#include "worker/scheduler_link.h"

namespace keel {

struct ExactSumOptions {
  ExactSumWorkload workload;
  // A local folder every worker can write (one machine, or a shared file
  // system): the ledgers and the report go there.
  std::string model_dir;
  int inflight = 4;  // pushes in flight per worker
  // Each worker waits this long after sending each push (0: none): a soak
  // runs a long job at a low rate, its sums still below 2^24.
  double push_interval_s = 0;
};

// The servers' table for the job: one float per key, SGD at rate 1 (no
// momentum, decay, schedule or staleness scaling), zero rows.
std::map<uint32_t, TableSpec> ExactSumTables();

// Runs this worker's part of the job; on worker 0, then the check, whose
// outcome goes to `out` (the command line gives standard error, which
// `keel launch` shows) and exact_sum.json. Throws Error if a request, a
// barrier or a ledger fails, and on worker 0 if the check finds a violation
// (after the report is written), naming how many and the first.
void RunExactSum(Node* node, SchedulerLink* scheduler, KVWorker* client,
                 const ExactSumOptions& options, std::ostream* out);

}  // namespace keel

#endif  // KEEL_WORKER_EXACT_SUM_JOB_H_
