#include "cli/exact_sum_flags.h"

#include <algorithm>

#include "base/error.h"
#include "cli/cluster_flags.h"
#include "cli/job_flags.h"
#include "flags/flag_rules.h"
#include "io/storage.h"

DEFINE_int32(exact_sum_minibatches, 20, "exact_sum: pushes per worker and epoch");
DEFINE_uint64(exact_sum_keys, 4096,
              "exact_sum: keys the pushes cover (the first 64 are in every push)");
DEFINE_int32(exact_sum_inflight, 4, "exact_sum: pushes in flight per worker");
DEFINE_double(exact_sum_push_interval_ms, 0,
              "exact_sum: milliseconds each worker waits after sending each push (a soak: a long "
              "job at a low rate; 0: none)");

namespace keel {

std::vector<FlagGroup> ExactSumFlagGroups() {
  return {{"exact sum",
           {"exact_sum_minibatches", "exact_sum_keys", "exact_sum_inflight",
            "exact_sum_push_interval_ms"}}};
}

ExactSumOptions ExactSumOptionsFromFlags() {
  ExactSumOptions options;
  options.workload.epochs = FLAGS_epochs;
  options.workload.minibatches = FLAGS_exact_sum_minibatches;
  options.workload.features = FLAGS_exact_sum_keys;
  options.workload.shared_features = std::min<uint64_t>(64, FLAGS_exact_sum_keys);
  CheckExactSumWorkload(options.workload, 1);
  RequireInRange("exact_sum_inflight", FLAGS_exact_sum_inflight, 1, 1024);
  options.inflight = FLAGS_exact_sum_inflight;
  RequireInRange("exact_sum_push_interval_ms", FLAGS_exact_sum_push_interval_ms, 0.0, 60000.0);
  options.push_interval_s = FLAGS_exact_sum_push_interval_ms / 1000;
  options.model_dir = FLAGS_model_dir;
  if (options.model_dir.empty()) {
    throw MakeError(
        "--job=exact_sum needs --model_dir FOLDER, a folder every worker can write "
        "(keel launch picks one when not given)");
  }
  if (IsStorageUri(options.model_dir)) {
    throw MakeError("--model_dir=", options.model_dir,
                    ": --job=exact_sum keeps its ledgers in a folder: give a plain path (local, "
                    "or on a file system every worker shares), not a storage URI");
  }
  return options;
}

}  // namespace keel
