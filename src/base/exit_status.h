// Exit statuses that mean the same to every keel process and to whoever
// starts them (the launcher, a job summary, a container's entry point), and
// how a command turns what it throws into one.
#ifndef KEEL_BASE_EXIT_STATUS_H_
#define KEEL_BASE_EXIT_STATUS_H_

#include <functional>
#include <string>

namespace keel {

// The exit status of every process of a preempted job (EX_TEMPFAIL: try
// again, with --resume=latest).
constexpr int kPreemptedExitStatus = 75;

// The exit status of a job that kept backups (--replication >= 1) and still
// lost every replica of a key range (announced when it happened), unless the
// scheduler was told to allow it (--allow_data_loss). The scheduler exits
// with it, and `keel launch` passes it on.
constexpr int kDataLostExitStatus = 3;

// Runs `body` and returns its exit code. If it throws anything at all, prints
// one line to standard error, "`name`: error: WHAT" (WHAT: a keel::Error's
// message, "out of memory" for std::bad_alloc, "unexpected error: WHAT" for
// another std::exception, "an exception that is not a std::exception" for
// the rest), and returns 1.
int ExitCodeOf(const std::string& name, const std::function<int()>& body);

// Makes an exception that escapes a thread (std::terminate) print one line
// naming `name` and what was thrown, then end the process with exit code 1
// (not abort's 134 and a core dump).
void ReportUncaughtExceptionsAs(const std::string& name);

}  // namespace keel

#endif  // KEEL_BASE_EXIT_STATUS_H_
