#include "launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "base/error.h"
#include "base/exit_status.h"
#include "base/time.h"

namespace keel {
namespace {

volatile sig_atomic_t interrupted = 0;
volatile sig_atomic_t term_signals = 0;
// Set once a group has somewhere to pass a SIGTERM (SetPreemptionTarget).
volatile sig_atomic_t preemption_forwarding = 0;

void OnSignal(int /*signal*/) { interrupted = 1; }

// The first SIGTERM is a preemption notice (see ProcessGroup::Wait); a second
// one interrupts.
void OnTerm(int /*signal*/) {
  if (term_signals > 0) interrupted = 1;
  term_signals = 1;
}

void InstallHandlers() {
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  action.sa_handler = OnTerm;
  sigaction(SIGTERM, &action, nullptr);
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "stopped";
}

bool Failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

bool Preempted(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) == kPreemptedExitStatus;
}

void Print(const std::string& name, const std::string& line, bool to_stderr) {
  std::string text = "[" + name + "] " + line + "\n";
  FILE* stream = to_stderr ? stderr : stdout;
  fwrite(text.data(), 1, text.size(), stream);
  fflush(stream);
}

// A child's pipes: its output, its error output, the report of a failed
// exec (closed on a successful one), and with a stdin pipe its input.
struct ChildPipes {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int exec_status[2] = {-1, -1};
  int in[2] = {-1, -1};
};

ChildPipes OpenPipes(const std::string& name, bool stdin_pipe) {
  ChildPipes pipes;
  if (pipe(pipes.out) != 0 || pipe(pipes.err) != 0 || pipe2(pipes.exec_status, O_CLOEXEC) != 0 ||
      (stdin_pipe && pipe2(pipes.in, O_CLOEXEC) != 0)) {
    throw MakeError("cannot start ", name, ": pipe: ", strerror(errno));
  }
  return pipes;
}

// In the forked child: writes its pid to `cgroup_procs` (a cgroup's
// cgroup.procs file) to join that cgroup. Only async-signal-safe calls.
bool JoinCgroup(const char* cgroup_procs) {
  char digits[24];
  size_t n = 0;
  for (pid_t pid = getpid(); pid > 0 && n < sizeof(digits); pid /= 10) {
    digits[n++] = static_cast<char>('0' + pid % 10);
  }
  char text[24];
  for (size_t i = 0; i < n; ++i) text[i] = digits[n - 1 - i];
  const int fd = open(cgroup_procs, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text, n) == static_cast<ssize_t>(n);
  close(fd);
  return ok;
}

// In the forked child: reports errno (a failed join or exec) on the
// exec_status pipe and exits 127. Async-signal-safe.
[[noreturn]] void FailChild(const ChildPipes& pipes) {
  const int error = errno;
  ssize_t ignored = write(pipes.exec_status[1], &error, sizeof(error));
  (void)ignored;
  _exit(127);
}

// In the forked child: joins `cgroup_procs`'s cgroup (if not null), wires
// the pipes to its standard streams and runs `argv`; reports a failed join
// or exec on the exec_status pipe.
[[noreturn]] void ExecChild(const ChildPipes& pipes, const std::vector<std::string>& argv,
                            pid_t parent, bool defer_notices, const char* cgroup_procs) {
  // The child dies with the launcher, and the terminal's Ctrl-C reaches the
  // launcher only, which stops the children in order.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  setpgid(0, 0);
  if (cgroup_procs && !JoinCgroup(cgroup_procs)) FailChild(pipes);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  if (defer_notices) {
    // Held until the role takes it as a preemption notice (the mask survives exec).
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, nullptr);
  }
  dup2(pipes.out[1], STDOUT_FILENO);
  dup2(pipes.err[1], STDERR_FILENO);
  if (pipes.in[0] >= 0) dup2(pipes.in[0], STDIN_FILENO);  // dup2 clears close-on-exec
  close(pipes.out[0]);
  close(pipes.out[1]);
  close(pipes.err[0]);
  close(pipes.err[1]);
  close(pipes.exec_status[0]);
  std::vector<char*> args = ExecArguments(argv);
  execvp(args[0], args.data());
  FailChild(pipes);
}

// In the parent after the fork: closes the ends the child uses.
void CloseChildEnds(const ChildPipes& pipes) {
  close(pipes.out[1]);
  close(pipes.err[1]);
  close(pipes.exec_status[1]);
  if (pipes.in[0] >= 0) close(pipes.in[0]);
}

// Waits for the child's exec: returns 0 if it succeeded, else its errno.
int ReadExecError(const ChildPipes& pipes) {
  int exec_error = 0;
  const ssize_t got = read(pipes.exec_status[0], &exec_error, sizeof(exec_error));
  close(pipes.exec_status[0]);
  return got == sizeof(exec_error) ? exec_error : 0;
}

// After a failed exec: closes the ends the parent kept.
void CloseParentEnds(const ChildPipes& pipes) {
  close(pipes.out[0]);
  close(pipes.err[0]);
  if (pipes.in[1] >= 0) close(pipes.in[1]);
}

}  // namespace

std::vector<char*> ExecArguments(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  return args;
}

void ProcessGroup::Emit(const std::string& name, const std::string& line, bool to_stderr) {
  if (line_handler_) line_handler_(name, line);
  if (output_) {
    output_(name, line, to_stderr);
  } else {
    Print(name, line, to_stderr);
  }
}

bool Interrupted() { return interrupted != 0 || (term_signals != 0 && !preemption_forwarding); }

ProcessGroup::ProcessGroup() { InstallHandlers(); }

ProcessGroup::~ProcessGroup() { StopAll(); }

std::string ProcessGroup::MakeCgroup(const std::string& name) const {
  if (cgroup_folder_.empty()) return "";
  std::string folder_name = name;
  for (char& c : folder_name) {
    if (c == ' ') c = '-';
  }
  const std::string folder = cgroup_folder_ + "/" + folder_name;
  if (mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST) {
    throw MakeError("cannot start ", name, ": cannot create the cgroup ", folder, ": ",
                    strerror(errno));
  }
  return folder + "/cgroup.procs";
}

pid_t ProcessGroup::Spawn(const std::string& name, const std::vector<std::string>& argv,
                          bool stdin_pipe, const std::string& input) {
  const std::string cgroup_procs = MakeCgroup(name);
  ChildPipes pipes = OpenPipes(name, stdin_pipe);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw MakeError("cannot start ", name, ": fork: ", strerror(errno));
  if (pid == 0) {
    ExecChild(pipes, argv, parent, defer_notices_,
              cgroup_procs.empty() ? nullptr : cgroup_procs.c_str());
  }
  CloseChildEnds(pipes);
  if (const int exec_error = ReadExecError(pipes)) {
    waitpid(pid, nullptr, 0);
    CloseParentEnds(pipes);
    throw MakeError("cannot start ", name, ": ", argv[0], ": ", strerror(exec_error));
  }
  fcntl(pipes.out[0], F_SETFL, O_NONBLOCK);
  fcntl(pipes.err[0], F_SETFL, O_NONBLOCK);
  Child child;
  child.name = name;
  child.pid = pid;
  child.out_fd = pipes.out[0];
  child.err_fd = pipes.err[0];
  child.argv = argv;
  child.in_fd = pipes.in[1];
  if (!input.empty() && (child.in_fd < 0 || write(child.in_fd, input.data(), input.size()) !=
                                                static_cast<ssize_t>(input.size()))) {
    std::cerr << "keel launch: could not hand " << name << " its input: " << strerror(errno)
              << "\n";
  }
  children_.push_back(std::move(child));
  if (observer_) observer_->Started(name, pid);
  return pid;
}

void ProcessGroup::Drain(Child& child, int fd, std::string& partial, bool to_stderr) {
  char buffer[65536];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) {
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        if (!partial.empty()) Emit(child.name, partial, to_stderr);
        partial.clear();
        close(fd);
        (to_stderr ? child.err_fd : child.out_fd) = -1;
      }
      return;
    }
    partial.append(buffer, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t end; (end = partial.find('\n', start)) != std::string::npos; start = end + 1) {
      Emit(child.name, partial.substr(start, end - start), to_stderr);
    }
    partial.erase(0, start);
  }
}

void ProcessGroup::Reap(Child& child, int status) {
  child.exited = true;
  child.status = status;
  if (child.in_fd >= 0) close(child.in_fd);
  child.in_fd = -1;
  // Forward what is left in its pipes before reporting.
  if (child.out_fd >= 0) Drain(child, child.out_fd, child.out_partial, false);
  if (child.err_fd >= 0) Drain(child, child.err_fd, child.err_partial, true);
  if (observer_) observer_->Exited(child.name, child.pid, status, child.tolerated);
}

int ProcessGroup::Poll(int wait_ms) {
  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, bool>> owners;
  for (size_t i = 0; i < children_.size(); ++i) {
    if (children_[i].out_fd >= 0) {
      fds.push_back({children_[i].out_fd, POLLIN, 0});
      owners.push_back({i, false});
    }
    if (children_[i].err_fd >= 0) {
      fds.push_back({children_[i].err_fd, POLLIN, 0});
      owners.push_back({i, true});
    }
  }
  if (!fds.empty()) {
    if (poll(fds.data(), fds.size(), wait_ms) > 0) {
      for (size_t f = 0; f < fds.size(); ++f) {
        if (!fds[f].revents) continue;
        Child& child = children_[owners[f].first];
        if (owners[f].second) {
          if (child.err_fd >= 0) Drain(child, child.err_fd, child.err_partial, true);
        } else if (child.out_fd >= 0) {
          Drain(child, child.out_fd, child.out_partial, false);
        }
      }
    }
  } else {
    usleep(static_cast<useconds_t>(wait_ms) * 1000);
  }
  int failed = -1;
  for (size_t i = 0; i < children_.size(); ++i) {
    Child& child = children_[i];
    if (child.exited) continue;
    int status = 0;
    if (waitpid(child.pid, &status, WNOHANG) == child.pid) {
      Reap(child, status);
      if (Preempted(status)) {
        preempted_ = true;  // not a failure: the job ends, to be resumed
      } else if (child.name == "scheduler" && WIFEXITED(status) &&
                 WEXITSTATUS(status) == kDataLostExitStatus) {
        data_lost_ = true;  // the job ended (its scheduler says it lost data): the others finish
      } else if (Failed(status) && !child.tolerated && failed < 0) {
        failed = static_cast<int>(i);
      }
    }
  }
  return failed;
}

int ProcessGroup::Wait(double timeout_s) {
  const double deadline = timeout_s > 0 ? MonotonicSeconds() + timeout_s : 0;
  double over_since = 0;
  while (true) {
    const int failed = Poll(100);
    if (observer_) observer_->Round();
    if (failed >= 0) {
      const Child& child = children_[static_cast<size_t>(failed)];
      Emit("launch", child.name + " " + DescribeStatus(child.status) + "; stopping the others",
           true);
      StopAll();
      return 1;
    }
    const int ended = preempted_ ? kPreemptedExitStatus : data_lost_ ? kDataLostExitStatus : 0;
    if (!AnyRunning()) return ended;
    if (StoppedAfterTheEnd(&over_since)) return ended;
    if (const int code = ForwardPreemption(); code >= 0) return code;
    if (Interrupted()) {
      Emit("launch", "interrupted; stopping every process", true);
      StopAll();
      return 130;
    }
    if (deadline > 0 && MonotonicSeconds() > deadline) {
      Emit("launch", "timed out after " + std::to_string(timeout_s) + " s; stopping every process",
           true);
      StopAll();
      return 124;
    }
  }
}

void ProcessGroup::SetPreemptionTarget(const std::string& name, double grace_s) {
  preemption_target_ = name;
  preemption_grace_s_ = grace_s;
  preemption_forwarding = 1;
}

int ProcessGroup::ForwardPreemption() {
  if (term_signals == 0 || preemption_target_.empty() || interrupted) return -1;
  const double now = MonotonicSeconds();
  if (preemption_forwarded_ == 0) {
    preemption_forwarded_ = now;
    if (Signal(preemption_target_, SIGTERM) < 0) {
      Emit("launch",
           "preemption notice (SIGTERM), but the " + preemption_target_ +
               " is not running; stopping every process",
           true);
      StopAll();
      return kPreemptedExitStatus;
    }
    Emit("launch",
         "preemption notice (SIGTERM): passed to the " + preemption_target_ +
             ", which checkpoints the job and ends it (a second SIGTERM or a SIGINT "
             "stops every process at once)",
         true);
    return -1;
  }
  // The scheduler bounds its own wait by the grace; this bounds the launcher's.
  if (now - preemption_forwarded_ < preemption_grace_s_ + kEndGraceSeconds + 10) return -1;
  Emit("launch", "the job did not end within the preemption grace; stopping every process", true);
  StopAll();
  return kPreemptedExitStatus;
}

bool ProcessGroup::AnyRunning() const {
  for (const Child& child : children_) {
    if (!child.exited) return true;
  }
  return false;
}

bool ProcessGroup::StoppedAfterTheEnd(double* over_since) {
  if (!observer_ || !observer_->JobOver()) return false;
  const double now = MonotonicSeconds();
  if (*over_since == 0) *over_since = now;
  if (now - *over_since < kEndGraceSeconds) return false;
  std::string names;
  for (Child& child : children_) {
    if (child.exited) continue;
    names += (names.empty() ? "" : ", ") + child.name;
    child.tolerated = true;  // stopped on purpose: its exit is no failure
  }
  Emit("launch", "the job is over; stopping what still runs: " + names, true);
  StopAll();
  return true;
}

bool ProcessGroup::Running(const std::string& name) const {
  for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
    if (it->name == name) return !it->exited;
  }
  return false;
}

ProcessGroup::Child* ProcessGroup::Find(const std::string& name) {
  for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
    if (it->name == name) return &*it;
  }
  return nullptr;
}

pid_t ProcessGroup::Signal(const std::string& name, int signal) {
  Child* child = Find(name);
  if (!child || child->exited) return -1;
  return kill(child->pid, signal) == 0 ? child->pid : -1;
}

void ProcessGroup::Tolerate(const std::string& name) {
  if (Child* child = Find(name)) child->tolerated = true;
}

pid_t ProcessGroup::Respawn(const std::string& name) {
  Child* child = Find(name);
  if (!child) throw MakeError("cannot restart ", name, ": no such process");
  if (!child->exited) {
    child->tolerated = true;
    kill(child->pid, SIGKILL);
    int status = 0;
    waitpid(child->pid, &status, 0);
    Reap(*child, status);
  }
  const std::vector<std::string> argv = child->argv;  // Spawn may move children_
  const pid_t pid = Spawn(name, argv);
  Find(name)->tolerated = true;
  return pid;
}

void ProcessGroup::SetRespawnArguments(const std::string& name, std::vector<std::string> argv) {
  if (Child* child = Find(name)) child->argv = std::move(argv);
}

void ProcessGroup::StopAll(double grace_s) {
  bool any = false;
  for (Child& child : children_) {
    if (!child.exited) {
      // End of input first: an ssh child passes it on to its remote command.
      if (child.in_fd >= 0) close(child.in_fd);
      child.in_fd = -1;
      // A keel role takes a lone SIGTERM as a preemption notice and goes on
      // for a while; the SIGINT after it stops it at once.
      kill(child.pid, SIGTERM);
      kill(child.pid, SIGINT);
      kill(child.pid, SIGCONT);  // a stopped child (fault injection) must see it
      any = true;
    }
  }
  const double deadline = MonotonicSeconds() + grace_s;
  while (any && MonotonicSeconds() < deadline) {
    any = false;
    for (Child& child : children_) {
      if (child.exited) continue;
      int status = 0;
      if (waitpid(child.pid, &status, WNOHANG) == child.pid) {
        Reap(child, status);
      } else {
        any = true;
      }
    }
    if (any) usleep(20000);
  }
  for (Child& child : children_) {
    if (child.exited) continue;
    kill(child.pid, SIGKILL);
    int status = 0;
    waitpid(child.pid, &status, 0);
    Reap(child, status);
  }
  for (Child& child : children_) {
    if (child.out_fd >= 0) close(child.out_fd);
    if (child.err_fd >= 0) close(child.err_fd);
    child.out_fd = child.err_fd = -1;
  }
}

}  // namespace keel
