// ProcessGroup: child processes started, watched and stopped together.
//
// Each child's stdout and stderr are forwarded line by line with a "[name] "
// prefix. Children die with the group: they are stopped when it is destroyed
// and killed by the kernel if this process dies (PR_SET_PDEATHSIG).
#ifndef KEEL_CLI_LAUNCHER_H_
#define KEEL_CLI_LAUNCHER_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace keel {

class ProcessGroup {
 public:
  ProcessGroup();
  ~ProcessGroup();  // stops every child still running
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // Starts `argv` (argv[0] is the executable path, or a name looked up in
  // PATH) as a child named `name`. With `stdin_pipe` the child reads a pipe
  // that stays open until the child is stopped (ssh forwards its end-of-file
  // to the remote command, which `keel guard` takes as the order to stop).
  // Throws Error if it cannot be started.
  pid_t Spawn(const std::string& name, const std::vector<std::string>& argv,
              bool stdin_pipe = false);

  // Called with each forwarded line (before it is printed), on the thread
  // that forwards output.
  void SetLineHandler(std::function<void(const std::string& name, const std::string& line)> h) {
    line_handler_ = std::move(h);
  }

  // Forwards output until every child has exited. Returns 0 if all exited
  // with status 0. If one fails (non-zero status or a signal), says which,
  // stops the rest and returns 1. On SIGINT/SIGTERM stops all and returns
  // 130. After `timeout_s` (0: none) stops all and returns 124.
  int Wait(double timeout_s);

  // Forwards output for up to `seconds`, returning early when `done()` is
  // true (checked between reads). Returns false if a child failed meanwhile.
  template <typename Done>
  bool Pump(double seconds, Done done);

  // Stops every running child: SIGTERM, then SIGKILL after `grace_s`.
  void StopAll(double grace_s = 2.0);

  // True while the named child is running.
  bool Running(const std::string& name) const;

 private:
  struct Child {
    std::string name;
    pid_t pid = -1;
    int out_fd = -1, err_fd = -1;
    int in_fd = -1;  // the write end of the child's stdin pipe, if any
    std::string out_partial, err_partial;
    bool exited = false;
    int status = 0;
  };

  // One round: reads available output (up to `wait_ms`) and reaps exited
  // children. Returns the index of a child that failed, or -1.
  int Poll(int wait_ms);
  void Drain(Child& child, int fd, std::string& partial, bool to_stderr);
  void Reap(Child& child, int status);
  void Emit(const std::string& name, const std::string& line, bool to_stderr);

  std::vector<Child> children_;
  std::function<void(const std::string&, const std::string&)> line_handler_;
};

// True once SIGINT or SIGTERM arrived (the group installs the handlers).
bool Interrupted();

}  // namespace keel

#include "cli/launcher_inl.h"

#endif  // KEEL_CLI_LAUNCHER_H_
