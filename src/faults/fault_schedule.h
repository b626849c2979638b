// FaultSchedule: the faults `keel launch --faults=SPEC` injects into a job.
//
// SPEC is a comma-separated list of items:
//
//   kill:ROLE:WHO@WHEN             SIGKILL (kill:scheduler@WHEN: the scheduler,
//                                  and likewise for stop, restart and preempt)
//   preempt:ROLE:WHO@WHEN          SIGTERM: a preemption notice, as spot
//                                  instances get; the job checkpoints and ends
//   stop:ROLE:WHO@WHEN+DURATION    SIGSTOP, then SIGCONT after DURATION
//   restart:ROLE:WHO@WHEN          start the role again with the same --rank
//                                  (killed first if it is still running;
//                                  random: one that is down, see WHO)
//   drop:ROLE:WHO=SHARE            the role drops SHARE of its outgoing data
//                                  messages (--drop_rate)
//   delay:ROLE:WHO=DURATION[~JITTER]
//                                  the role delays its outgoing data messages
//                                  (--delay_ms, --delay_jitter_ms)
//   join:server@WHEN               start one more server with --join: it joins
//                                  the running job and takes key ranges from
//                                  the others (needs --key_ranges above
//                                  --servers); it is server N (--rank=N), N
//                                  counting on from the servers started
//   drain:server:R@WHEN            ask the scheduler to drain server R (keel
//                                  admin drain): its key ranges move to the
//                                  others, then it exits
//   partition:GROUP|GROUP@TIME+DURATION
//                                  no message passes between the two groups
//                                  from TIME until TIME + DURATION (heal);
//                                  GROUP is a comma list of processes:
//                                  server:R, worker:R, scheduler. Needs root
//                                  (faults/partition.h)
//
//   ROLE      server | worker; or scheduler, without :WHO (kill, stop,
//             restart and preempt only: it sends no data messages); the launcher restarts
//             it on the port it had, and its kill does not end the job
//   WHO       a rank (0, 1, ...), * (every rank), or random (kill, preempt,
//             stop and restart only), picked when the fault fires: for kill and stop a
//             running process of that role, for restart one that is down (not
//             running); with none, the firing is skipped (and logged so)
//   WHEN      TIME, or rate=R/s: at random times, R per second on average
//             (a Poisson process), until the job ends. No fault fires once
//             the job is over (fault_runner.h). start+TIME: TIME after the
//             job started training (the scheduler's first progress record),
//             however long the cluster took to form: a fault meant for a
//             running job (a server killed at 1.5s could be gone before it
//             registered, and the job then never starts)
//   TIME, DURATION, JITTER
//             a number with s or ms: 5s, 1.5s, 300ms; times count from the
//             launch
//   SHARE     a number in [0, 1] or a percentage: 0.01, 1%
//
// Example: kill:server:1@5s,restart:server:1@7s,stop:worker:0@3s+2s,
//          kill:worker:random@rate=0.1/s,restart:worker:random@rate=0.2/s,
//          drop:server:0=0.01,delay:worker:1=5ms~2ms,
//          partition:server:0|worker:0,worker:1@5s+3s
// (an item that is not ACTION:... continues a partition's group: the comma
// inside a GROUP does not end the item)
#ifndef KEEL_FAULTS_FAULT_SCHEDULE_H_
#define KEEL_FAULTS_FAULT_SCHEDULE_H_

#include <string>
#include <vector>

namespace keel {

enum class FaultAction {
  kKill,
  kStop,
  kRestart,
  kDrop,
  kDelay,
  kPreempt,
  kPartition,
  kJoin,
  kDrain
};

// "kill", "stop", ...
const char* FaultActionName(FaultAction action);

struct FaultItem {
  static constexpr int kEveryRank = -1;
  static constexpr int kRandomRank = -2;
  static constexpr int kNewRank = -3;  // join: the server started

  FaultAction action = FaultAction::kKill;
  std::string role;  // "server", "worker" or "scheduler"
  int rank = 0;      // a rank, kEveryRank or kRandomRank (0 for the scheduler)
  // kill, stop, restart, preempt: at `at_s`, or (rate_per_s > 0) at random times.
  double at_s = 0;
  // `at_s` counts from the job's start (start+TIME), not from the launch.
  bool after_start = false;
  double rate_per_s = 0;
  double duration_s = 0;  // stop: how long before SIGCONT
  double drop_rate = 0;   // drop
  double delay_ms = 0;    // delay
  double jitter_ms = 0;   // delay
  // partition: the processes of each side, named as the launcher names them
  // ("server 0", "worker 1", "scheduler"); `duration_s` until the heal.
  std::vector<std::string> side_a, side_b;
  std::string text;  // the item as written, for messages

  bool transport() const { return action == FaultAction::kDrop || action == FaultAction::kDelay; }
  // True if the item applies to `role` `rank`.
  bool Targets(const std::string& role, int rank) const;
};

struct FaultSchedule {
  std::vector<FaultItem> items;

  bool empty() const { return items.empty(); }
  // The first partition item, or nullptr.
  const FaultItem* FirstPartition() const;
  // The transport flags (--drop_rate, --delay_ms, ...) for one process; a
  // later item overrides an earlier one for the same process.
  std::vector<std::string> TransportFlags(const std::string& role, int rank) const;
};

// Parses SPEC for a job of `servers` servers and `workers` workers. Throws
// Error naming the offending item and what is wrong with it.
FaultSchedule ParseFaultSchedule(const std::string& spec, int servers, int workers);

}  // namespace keel

#endif  // KEEL_FAULTS_FAULT_SCHEDULE_H_
