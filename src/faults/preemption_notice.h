// Preemption notices as processes receive them: a SIGTERM, which spot
// instances (and Kubernetes, and Slurm) send some time before the machine or
// the pod goes.
//
// A role (scheduler, server, worker) installs the handlers before it joins
// the cluster and, once it has joined, a PreemptionWatch: the first SIGTERM
// calls the watch's handler (on the watch's thread), which asks the scheduler
// for the preemption checkpoint; a second SIGTERM, or a SIGINT after the
// first SIGTERM, ends the process at once with kPreemptedExitStatus. A SIGINT
// before any SIGTERM keeps its default: the process dies at once.
#ifndef KEEL_FAULTS_PREEMPTION_NOTICE_H_
#define KEEL_FAULTS_PREEMPTION_NOTICE_H_

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "base/exit_status.h"

namespace keel {

// What a preempted process says last: the checkpoint it committed (`checkpoint`
// in store `uri`; "" if none) or, without one, `note`.
std::string PreemptedLine(const std::string& checkpoint, const std::string& uri,
                          const std::string& note);

class Node;

// A worker whose job stopped with an error: if the job is being preempted
// (this worker asked, was told to stop, or the scheduler ended the job),
// waits for the scheduler's SHUTDOWN (within the grace and 10 s) and returns
// whether it said the job was preempted, logging the checkpoint it named.
bool EndedByPreemption(Node* node, double preemption_grace_s);

// Installs the signal handlers (for the rest of the process's life): from
// now on a SIGTERM is remembered as a notice. Unblocks SIGTERM on the calling
// thread (the first, before any other starts). Idempotent.
void InstallPreemptionHandlers();

class PreemptionWatch {
 public:
  // Installs the handlers and starts the thread that calls `on_notice` once,
  // at the first SIGTERM (at once if one came already).
  explicit PreemptionWatch(std::function<void()> on_notice);
  ~PreemptionWatch();  // stops the thread; the handlers stay
  PreemptionWatch(const PreemptionWatch&) = delete;
  PreemptionWatch& operator=(const PreemptionWatch&) = delete;

 private:
  std::function<void()> on_notice_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace keel

#endif  // KEEL_FAULTS_PREEMPTION_NOTICE_H_
