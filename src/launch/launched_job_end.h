// LaunchedJobEnd: whether a job `keel launch` started is over, told from its
// processes' exits alone.
//
// The job is over once any of these has happened:
// - the scheduler exited: it exits once every worker reported done (or the
//   job failed), after sending SHUTDOWN to every node. Not when a fault
//   killed it (a tolerated exit by a signal): it is started again, or the
//   nodes give up waiting for it by themselves;
// - a server exited with status 0: a server exits cleanly only on the
//   scheduler's SHUTDOWN (this covers a scheduler the launcher did not start),
//   unless it was drained (it leaves a running job);
// - the newest process of every worker rank exited with status 0.
// A fault that fires after that would act on a job that no longer exists (a
// restarted process would wait for a scheduler that is gone).
//
// Processes are named as the launcher names them: "scheduler", "server R",
// "worker R"; other names are ignored. Not thread-safe.
#ifndef KEEL_LAUNCH_LAUNCHED_JOB_END_H_
#define KEEL_LAUNCH_LAUNCHED_JOB_END_H_

#include <set>
#include <string>

namespace keel {

class LaunchedJobEnd {
 public:
  // For a job of `workers` workers.
  explicit LaunchedJobEnd(int workers) : workers_(workers) {}

  // The process `name` started (a restarted worker is not finished any more).
  void Started(const std::string& name);
  // The process `name` exited with wait status `status` (as waitpid gives it);
  // `tolerated`: its failure was expected (a fault acted on it).
  void Exited(const std::string& name, int status, bool tolerated = false);

  // The server `name` was drained: its clean exit does not end the job.
  void Drained(const std::string& name) { drained_.insert(name); }

  bool over() const { return !reason_.empty(); }
  // Why the job is over, like "the scheduler exited"; "" while it is not.
  const std::string& reason() const { return reason_; }

 private:
  int workers_;
  std::set<int> finished_workers_;  // ranks whose newest process exited with 0
  std::set<std::string> drained_;   // servers drained from the running job
  std::string reason_;
};

}  // namespace keel

#endif  // KEEL_LAUNCH_LAUNCHED_JOB_END_H_
