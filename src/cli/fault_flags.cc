#include "cli/fault_flags.h"

#include <gflags/gflags.h>

#include "base/error.h"
#include "flags/flag_rules.h"

// Transport faults: on the process given them, for its outgoing data messages.
DEFINE_double(drop_rate, 0,
              "fault injection: share of this node's outgoing data messages (push, pull, dump, "
              "clock; requests and responses) to drop, in [0, 1]");
DEFINE_double(delay_ms, 0, "fault injection: hold this node's outgoing data messages this long");
DEFINE_double(delay_jitter_ms, 0,
              "fault injection: and a uniform extra of up to this long (order per peer kept)");
DEFINE_double(delay_rate, 1, "fault injection: share of outgoing data messages delayed");
DEFINE_uint64(fault_seed, 1, "seed of the fault injection's random decisions");
DEFINE_bool(faults_on_control, false,
            "fault injection: --drop_rate and --delay_* also apply to the control messages that "
            "are sent again when lost (heartbeats, barriers, checkpoint and end-of-epoch "
            "requests, a worker's done report, and the scheduler's answers to them)");

// Resends (workers).
DEFINE_int32(request_timeout_ms, 1000,
             "worker: resend a push/pull/clock/dump that has had no answer for this long, until "
             "a server's round trip is measured (pushes, pulls and clocks then wait for that "
             "estimate; dumps always start from this)");
DEFINE_int32(request_min_timeout_ms, 2,
             "worker: the shortest wait for an answer, however short the round trip measured");
DEFINE_int32(request_max_timeout_ms, 16000,
             "worker: the wait for an answer doubles per resend up to this");
DEFINE_int32(request_attempts, 10,
             "worker: sends of one request in all before it fails naming the server");

// Launch.
DEFINE_string(faults, "",
              "launch: fault schedule, like kill:server:1@5s,restart:server:1@7s,"
              "stop:worker:0@3s+2s,kill:worker:random@rate=0.1/s,drop:server:0=0.01,"
              "delay:worker:1=5ms~2ms,preempt:worker:0@9s; @start+2s: 2 s after the job started "
              "training (see docs/ARCHITECTURE.md, Faults)");
DEFINE_string(event_log, "", "launch: write every fault and process start/exit here (JSON lines)");

namespace keel {

std::vector<FlagGroup> FaultFlagGroups() {
  return {
      {"faults",
       {"faults", "event_log", "fault_seed", "drop_rate", "delay_ms", "delay_jitter_ms",
        "delay_rate", "faults_on_control"}},
      {"resends",
       {"request_timeout_ms", "request_min_timeout_ms", "request_max_timeout_ms",
        "request_attempts"}},
  };
}

TransportFaults TransportFaultsFromFlags() {
  RequireInRange("drop_rate", FLAGS_drop_rate, 0.0, 1.0, "a share of the messages");
  RequireInRange("delay_rate", FLAGS_delay_rate, 0.0, 1.0, "a share of the messages");
  RequireInRange("delay_ms", FLAGS_delay_ms, 0.0, kMaxSeconds * 1e3);
  RequireInRange("delay_jitter_ms", FLAGS_delay_jitter_ms, 0.0, kMaxSeconds * 1e3);
  TransportFaults faults;
  faults.drop_rate = FLAGS_drop_rate;
  faults.delay_ms = FLAGS_delay_ms;
  faults.delay_jitter_ms = FLAGS_delay_jitter_ms;
  faults.delay_rate = FLAGS_delay_rate;
  faults.seed = FLAGS_fault_seed;
  faults.control = FLAGS_faults_on_control;
  try {
    faults.Check();
  } catch (const Error& e) {
    throw MakeError("--drop_rate/--delay_*: ", e.what());
  }
  return faults;
}

RequestRetry RequestRetryFromFlags() {
  const int max_ms = kMaxCount;  // 11.5 days: kMaxSeconds in ms would not fit an int
  RequirePositive("request_timeout_ms", FLAGS_request_timeout_ms, max_ms);
  RequirePositive("request_min_timeout_ms", FLAGS_request_min_timeout_ms, max_ms);
  RequireInRange("request_max_timeout_ms", FLAGS_request_max_timeout_ms, FLAGS_request_timeout_ms,
                 max_ms, "not below --request_timeout_ms");
  RequireInRange("request_min_timeout_ms", FLAGS_request_min_timeout_ms, 1,
                 FLAGS_request_max_timeout_ms, "not above --request_max_timeout_ms");
  RequireInRange("request_min_timeout_ms", FLAGS_request_min_timeout_ms, 1,
                 FLAGS_request_timeout_ms, "not above --request_timeout_ms, the first estimate");
  RequireInRange("request_attempts", FLAGS_request_attempts, 1, 1000);
  RequestRetry retry;
  retry.timeout_s = FLAGS_request_timeout_ms * 1e-3;
  retry.min_timeout_s = FLAGS_request_min_timeout_ms * 1e-3;
  retry.max_timeout_s = FLAGS_request_max_timeout_ms * 1e-3;
  retry.max_attempts = FLAGS_request_attempts;
  try {
    retry.Check();
  } catch (const Error& e) {
    throw MakeError(
        "--request_timeout_ms/--request_min_timeout_ms/--request_max_timeout_ms/"
        "--request_attempts: ",
        e.what());
  }
  return retry;
}

bool IsFaultLaunchFlag(const std::string& name) { return name == "faults" || name == "event_log"; }

}  // namespace keel
