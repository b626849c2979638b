// The command line's wire flags (wire_flags.cc): the precision a worker's
// pushes and pulls travel in (kv/wire_precision.h), and the filter that holds
// back the small rows of its pushes (worker/push_filter.h).
#ifndef KEEL_CLI_WIRE_FLAGS_H_
#define KEEL_CLI_WIRE_FLAGS_H_

#include <gflags/gflags.h>

#include <string>
#include <vector>

#include "flags/flag_group.h"
#include "keel.pb.h"

DECLARE_string(wire_precision);
DECLARE_double(push_filter_threshold);

namespace keel {

// The heading of `keel COMMAND --help` for this file's flags.
std::vector<FlagGroup> WireFlagGroups();

// --wire_precision for a worker running `job` with `predictor_type` (auto:
// fp16 for linear_learner unless the predictor is a regressor, fp32 for the
// rest). Throws Error naming the flag and its value if it is not
// auto, fp32, bf16 or fp16, or if it is 16-bit for a
// job that checks sums exactly (exact_sum) or measures the float32 transport
// (kv_bench): those refuse it rather than run with another precision.
proto::WirePrecision WirePrecisionFromFlags(const std::string& job,
                                            const std::string& predictor_type);

// --push_filter_threshold for a worker running `job` (0: no filter). Throws
// Error naming the flag and its value if it is negative or not finite, or if
// it is above 0 for a job that checks sums exactly (exact_sum) or measures
// the transport (kv_bench): every gradient of those goes as it is.
float PushFilterThresholdFromFlags(const std::string& job);

}  // namespace keel

#endif  // KEEL_CLI_WIRE_FLAGS_H_
