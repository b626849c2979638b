// Exit statuses that mean the same to every keel process and to whoever
// starts them (the launcher, a job summary, a container's entry point).
#ifndef KEEL_BASE_EXIT_STATUS_H_
#define KEEL_BASE_EXIT_STATUS_H_

namespace keel {

// The exit status of every process of a preempted job (EX_TEMPFAIL: try
// again, with --resume=latest).
constexpr int kPreemptedExitStatus = 75;

// The exit status of a job that kept backups (--replication >= 1) and still
// lost every replica of a key range (announced when it happened), unless the
// scheduler was told to allow it (--allow_data_loss). The scheduler exits
// with it, and `keel launch` passes it on.
constexpr int kDataLostExitStatus = 3;

}  // namespace keel

#endif  // KEEL_BASE_EXIT_STATUS_H_
