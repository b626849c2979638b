// The command line's serving flags (serve_flags.cc): where `keel serve`
// listens, its threads and its request limit. Every user of these flags
// includes this header; the flags are defined nowhere else.
#ifndef KEEL_CLI_SERVE_FLAGS_H_
#define KEEL_CLI_SERVE_FLAGS_H_

#include <gflags/gflags.h>

#include <vector>

#include "flags/flag_group.h"
#include "serve/inference_service.h"

DECLARE_int32(serve_port);
DECLARE_string(serve_bind);
DECLARE_int32(serve_threads);
DECLARE_uint64(max_request_bytes);

namespace keel {

// The headings of `keel COMMAND --help` for this file's flags (flags/flag_group.h).
std::vector<FlagGroup> ServeFlagGroups();

// `keel serve`'s service from the flags (--model_dir, the serving flags,
// --device). Throws Error naming a bad flag and its rule.
InferenceServiceOptions ServeOptionsFromFlags();

}  // namespace keel

#endif  // KEEL_CLI_SERVE_FLAGS_H_
