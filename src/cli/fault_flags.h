// The command line's fault-injection and resend flags (fault_flags.cc).
#ifndef KEEL_CLI_FAULT_FLAGS_H_
#define KEEL_CLI_FAULT_FLAGS_H_

#include <gflags/gflags.h>

#include <string>

#include "flags/flag_group.h"
#include "kv/kv_worker.h"
#include "kv/van.h"

// `keel launch`: the fault schedule (faults/fault_schedule.h), the event log,
// and the seed of the schedule's random choices (and of the transport faults).
DECLARE_string(faults);
DECLARE_string(event_log);
DECLARE_uint64(fault_seed);

namespace keel {

// The headings of `keel COMMAND --help` for this file's flags (flags/flag_group.h).
std::vector<FlagGroup> FaultFlagGroups();

// --drop_rate, --delay_ms, --delay_jitter_ms, --delay_rate, --fault_seed.
// Throws Error naming the flag, its value and the rule (rates in [0, 1]).
TransportFaults TransportFaultsFromFlags();
// --request_timeout_ms, --request_min_timeout_ms, --request_max_timeout_ms,
// --request_attempts. Throws Error naming the flag, its value and the rule
// (timeouts above 0, min <= first <= max).
RequestRetry RequestRetryFromFlags();

// Launch flags that are not forwarded to the roles.
bool IsFaultLaunchFlag(const std::string& name);

}  // namespace keel

#endif  // KEEL_CLI_FAULT_FLAGS_H_
