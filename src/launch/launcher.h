// ProcessGroup: child processes started, watched and stopped together.
//
// Each child's stdout and stderr are forwarded line by line with a "[name] "
// prefix. Children die with the group: they are stopped when it is destroyed
// and killed by the kernel if this process dies (PR_SET_PDEATHSIG).
#ifndef KEEL_LAUNCH_LAUNCHER_H_
#define KEEL_LAUNCH_LAUNCHER_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace keel {

class ProcessGroup {
 public:
  // Told of every child started and reaped, and called once per round of
  // Wait (fault injection hooks in here: src/faults/fault_runner.h).
  class Observer {
   public:
    virtual ~Observer() = default;
    virtual void Started(const std::string& name, pid_t pid) = 0;
    // `tolerated`: the child was marked with Tolerate.
    virtual void Exited(const std::string& name, pid_t pid, int status, bool tolerated) = 0;
    virtual void Round() = 0;
    // True once the job the children run is over (src/launch/launched_job_end.h). Wait
    // then gives the children still running kEndGraceSeconds to exit on
    // their own (they were told to shut down), then stops them.
    virtual bool JobOver() const = 0;
  };

  // How long Wait lets children run on once the observer says the job is over.
  static constexpr double kEndGraceSeconds = 3.0;

  ProcessGroup();
  ~ProcessGroup();  // stops every child still running
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // Starts `argv` (argv[0] is the executable path, or a name looked up in
  // PATH) as a child named `name`. With `stdin_pipe` the child reads a pipe
  // that stays open until the child is stopped (ssh forwards its end-of-file
  // to the remote command, which `keel guard` takes as the order to stop);
  // `input` is written to that pipe first (up to the pipe's 64 KiB: a cluster
  // secret for `keel guard --secret_from_stdin`). Throws Error if it cannot
  // be started.
  pid_t Spawn(const std::string& name, const std::vector<std::string>& argv,
              bool stdin_pipe = false, const std::string& input = "");

  // Called with each forwarded line (before it is printed), on the thread
  // that forwards output.
  void SetLineHandler(std::function<void(const std::string& name, const std::string& line)> h) {
    line_handler_ = std::move(h);
  }

  // Called with each forwarded line instead of printing it (`name` is
  // "launch" for the group's own reports), on the thread that forwards
  // output. Set before Spawn; the handler must outlive the group.
  using Output =
      std::function<void(const std::string& name, const std::string& line, bool to_stderr)>;
  void SetOutput(Output output) { output_ = std::move(output); }

  // A line of the launcher's own (`name`: "launch", "faults"), shown as the
  // children's are: through the Output handler when one is set.
  void Emit(const std::string& name, const std::string& line, bool to_stderr);

  // Forwards output until every child has exited. Returns 0 if all exited
  // with status 0, or if the observer says the job is over and the children
  // still running kEndGraceSeconds later were stopped (their exits do not
  // fail the group). If one fails (non-zero status or a signal), says which,
  // stops the rest and returns 1. On SIGINT (or SIGTERM without a preemption
  // target) stops all and returns 130. After `timeout_s` (0: none) stops all
  // and returns 124. A child that exits with kPreemptedExitStatus is no
  // failure: the group then returns that status once the job is over; nor is
  // the child named "scheduler" exiting with kDataLostExitStatus (it ended a
  // job that lost data), whose status the group returns once every child is
  // done (from any other child that status is a failure).
  int Wait(double timeout_s);

  // A first SIGTERM (a preemption notice) is passed to the child `name` (the
  // scheduler), which checkpoints the job and ends it; Wait stops the rest if
  // the job is not over within `grace_s` (plus a margin). A second SIGTERM or
  // a SIGINT stops every child at once.
  void SetPreemptionTarget(const std::string& name, double grace_s);
  // Children started from now on start with SIGTERM blocked, for children
  // that are keel roles: a role unblocks it once it takes a SIGTERM as a
  // preemption notice (InstallPreemptionHandlers), so a notice sent while it
  // starts (loading its libraries can take a second) waits instead of
  // killing it. A SIGINT still stops such a child at once.
  void DeferNotices() { defer_notices_ = true; }

  // Forwards output for up to `seconds`, returning early when `done()` is
  // true (checked between reads). Returns false if a child failed meanwhile.
  template <typename Done>
  bool Pump(double seconds, Done done);

  // Stops every running child: SIGTERM, then SIGKILL after `grace_s`.
  void StopAll(double grace_s = 2.0);

  // True while the named child is running.
  bool Running(const std::string& name) const;

  // Set before Spawn; not owned.
  void SetObserver(Observer* observer) { observer_ = observer; }
  // From now on each child joins the cgroup FOLDER/NAME (spaces in its name
  // made dashes; created if missing) before it runs: faults/partition.h tells
  // processes apart by it. Spawn throws Error if the child cannot join.
  void SetCgroupFolder(const std::string& folder) { cgroup_folder_ = folder; }
  // Sends `signal` to the named child; returns its pid, or -1 if it is not running.
  pid_t Signal(const std::string& name, int signal);
  // The named child's failure, now or later, does not fail the group (a fault
  // injected on purpose); nor does the failure of a child restarted from it.
  void Tolerate(const std::string& name);
  // Starts the named child again with the same arguments (killing it first,
  // SIGKILL, if it still runs). Throws Error if it cannot be started.
  pid_t Respawn(const std::string& name);
  // The arguments Respawn starts the named child with from now on (a
  // scheduler that chose a free port is restarted on that port).
  void SetRespawnArguments(const std::string& name, std::vector<std::string> argv);

 private:
  struct Child {
    std::string name;
    pid_t pid = -1;
    int out_fd = -1, err_fd = -1;
    int in_fd = -1;  // the write end of the child's stdin pipe, if any
    std::string out_partial, err_partial;
    bool exited = false;
    int status = 0;
    std::vector<std::string> argv;
    bool tolerated = false;
  };

  // With a cgroup folder: creates the child's cgroup and returns its
  // cgroup.procs path; "" without one. Throws Error if it cannot.
  std::string MakeCgroup(const std::string& name) const;
  // The newest child named `name`, or nullptr.
  Child* Find(const std::string& name);
  bool AnyRunning() const;
  // Once the job is over (the observer says so; `over_since` is when Wait
  // first saw it, 0 before) and the grace has passed: stops the children
  // still running, naming them, and returns true.
  bool StoppedAfterTheEnd(double* over_since);
  // After a SIGTERM: passes it to the preemption target once, and returns
  // the status Wait should return (when the job overran the grace), else -1.
  int ForwardPreemption();

  // One round: reads available output (up to `wait_ms`) and reaps exited
  // children. Returns the index of a child that failed, or -1.
  int Poll(int wait_ms);
  void Drain(Child& child, int fd, std::string& partial, bool to_stderr);
  void Reap(Child& child, int status);

  std::vector<Child> children_;
  Observer* observer_ = nullptr;
  std::function<void(const std::string&, const std::string&)> line_handler_;
  Output output_;
  std::string preemption_target_;
  double preemption_grace_s_ = 0;
  double preemption_forwarded_ = 0;  // MonotonicSeconds() of the forward; 0: none
  bool preempted_ = false;           // a child exited with kPreemptedExitStatus
  bool data_lost_ = false;           // the scheduler exited with kDataLostExitStatus
  bool defer_notices_ = false;
  std::string cgroup_folder_;
};

// True once SIGINT arrived, or SIGTERM with nowhere to pass it as a
// preemption notice, or a second SIGTERM (the group installs the handlers).
bool Interrupted();

// `argv` as execv and execvp take it: pointers to the strings, then a null.
// Valid while `argv` is unchanged.
std::vector<char*> ExecArguments(const std::vector<std::string>& argv);

}  // namespace keel

#include "launch/launcher_inl.h"

#endif  // KEEL_LAUNCH_LAUNCHER_H_
