// The command line's exact_sum flags (exact_sum_flags.cc): the shape of the
// checking job's pushes. The job also reads --epochs and --model_dir (job
// flags). Every user of these flags includes this header; the flags are
// defined nowhere else.
#ifndef KEEL_CLI_EXACT_SUM_FLAGS_H_
#define KEEL_CLI_EXACT_SUM_FLAGS_H_

#include <gflags/gflags.h>

#include <vector>

#include "flags/flag_group.h"
#include "worker/exact_sum_job.h"

DECLARE_int32(exact_sum_minibatches);
DECLARE_uint64(exact_sum_keys);
DECLARE_int32(exact_sum_inflight);

namespace keel {

// The headings of `keel COMMAND --help` for this file's flags (flags/flag_group.h).
std::vector<FlagGroup> ExactSumFlagGroups();

// --job=exact_sum's options from the flags. Throws Error naming a bad flag,
// a missing --model_dir, or one on object storage (the workers' ledgers are
// local files).
ExactSumOptions ExactSumOptionsFromFlags();

}  // namespace keel

#endif  // KEEL_CLI_EXACT_SUM_FLAGS_H_
