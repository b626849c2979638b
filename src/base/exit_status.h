// Exit statuses that mean the same to every keel process and to whoever
// starts them (the launcher, a job summary, a container's entry point).
#ifndef KEEL_BASE_EXIT_STATUS_H_
#define KEEL_BASE_EXIT_STATUS_H_

namespace keel {

// The exit status of every process of a preempted job (EX_TEMPFAIL: try
// again, with --resume=latest).
constexpr int kPreemptedExitStatus = 75;

}  // namespace keel

#endif  // KEEL_BASE_EXIT_STATUS_H_
