// The command line's fault-injection and resend flags (fault_flags.cc).
#ifndef KEEL_CLI_FAULT_FLAGS_H_
#define KEEL_CLI_FAULT_FLAGS_H_

#include <string>

#include "kv/kv_worker.h"
#include "kv/van.h"

namespace keel {

// --drop_rate, --delay_ms, --delay_jitter_ms, --delay_rate, --fault_seed.
// Throws Error on a bad value.
TransportFaults TransportFaultsFromFlags();
// --request_timeout_ms, --request_max_timeout_ms, --request_attempts.
// Throws Error on a bad value.
RequestRetry RequestRetryFromFlags();

}  // namespace keel

#endif  // KEEL_CLI_FAULT_FLAGS_H_
