#include "cli/role_flags.h"

#include "base/error.h"
#include "cli/bench_flags.h"
#include "cli/cluster_flags.h"
#include "cli/exact_sum_flags.h"
#include "cli/job_flags.h"
#include "cli/metrics_flags.h"
#include "cli/wire_flags.h"

namespace keel {

RoleSettings RoleSettingsFromFlags() {
  RoleSettings settings;
  settings.job = FLAGS_job;
  settings.predictor_type = FLAGS_predictor_type;
  settings.bench_out = FLAGS_bench_out;
  settings.heartbeat_interval_s = FLAGS_heartbeat_interval;
  settings.preemption_grace_s = FLAGS_preemption_grace;
  settings.port_file = FLAGS_port_file;
  settings.progress_records = FLAGS_progress_records;
  settings.scheduler = FLAGS_scheduler;
  settings.scheduler_timeout_s = FLAGS_scheduler_timeout;
  settings.join = FLAGS_join;
  return settings;
}

KVBenchOptions CheckWorkerJobFlags() {
  KVBenchOptions bench;
  if (IsTrainingJob(FLAGS_job)) {
    JobTablesFromFlags();  // the hyperparameters
    CheckComputeFlags();   // and the device: a worker without one fails now
    TrainerOptionsFromFlags();
  } else if (FLAGS_job == "kv_bench") {
    bench = BenchFlags();
    if (FLAGS_bench_out.empty()) throw MakeError("--job=kv_bench needs --bench_out FOLDER");
  } else if (FLAGS_job == "exact_sum") {
    ExactSumOptionsFromFlags();
  } else {
    throw MakeError("--job '", FLAGS_job,
                    "' is not linear_learner, factorization_machines, kv_bench or exact_sum");
  }
  WirePrecisionFromFlags(FLAGS_job, FLAGS_predictor_type);
  PushFilterThresholdFromFlags(FLAGS_job);
  StalenessFromFlags();
  return bench;
}

}  // namespace keel
