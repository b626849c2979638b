// What the role commands (`keel scheduler`, `keel server`, `keel worker`:
// cli/role_commands.cc) read from the flags beside their options structs,
// and the check of a worker's job flags that `keel launch` runs too.
#ifndef KEEL_CLI_ROLE_FLAGS_H_
#define KEEL_CLI_ROLE_FLAGS_H_

#include <string>

#include "bench/kv_bench_job.h"

namespace keel {

struct RoleSettings {
  std::string job;                   // --job
  std::string predictor_type;        // --predictor_type
  std::string bench_out;             // --bench_out (--job=kv_bench)
  double heartbeat_interval_s = 1;   // --heartbeat_interval
  double preemption_grace_s = 90;    // --preemption_grace
  std::string port_file;             // --port_file
  bool progress_records = false;     // --progress_records
  std::string scheduler;             // --scheduler
  double scheduler_timeout_s = 60;   // --scheduler_timeout
  bool join = false;                 // --join
};
RoleSettings RoleSettingsFromFlags();

// The worker's job flags (--job and what it needs): the kv_bench cases for
// --job=kv_bench. Throws Error if any is wrong.
KVBenchOptions CheckWorkerJobFlags();

}  // namespace keel

#endif  // KEEL_CLI_ROLE_FLAGS_H_
