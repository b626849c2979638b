// `keel guard -- COMMAND...` (launch/remote.h): the remote end of an ssh launch,
// which stops its command when the connection closes.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.h"
#include "base/time.h"
#include "kv/cluster_secret.h"
#include "launch/launcher.h"
#include "launch/remote.h"

namespace keel {
namespace {

volatile sig_atomic_t guard_signal = 0;
void OnGuardSignal(int signal) { guard_signal = signal; }

int StatusCode(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Starts `command` in a process group of its own, its input /dev/null; it
// dies with this process.
pid_t StartGuarded(const std::vector<std::string>& command) {
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) throw MakeError("keel guard: fork: ", strerror(errno));
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    setpgid(0, 0);
    for (int signal : {SIGHUP, SIGINT, SIGTERM, SIGPIPE}) ::signal(signal, SIG_DFL);
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    std::vector<char*> args = ExecArguments(command);
    execvp(args[0], args.data());
    fprintf(stderr, "keel guard: cannot run %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  setpgid(child, child);  // also here, so the group exists before any kill
  return child;
}

// Waits until the child exits (returns true with *status set), or until a
// signal came or standard input reached its end (returns false).
bool WaitWhileInputOpen(pid_t child, int* status) {
  bool input_open = true;
  while (true) {
    if (waitpid(child, status, WNOHANG) == child) return true;
    if (guard_signal || !input_open) return false;
    pollfd input{STDIN_FILENO, POLLIN, 0};
    if (poll(&input, 1, 200) > 0) {
      char buffer[512];
      const ssize_t n = read(STDIN_FILENO, buffer, sizeof(buffer));
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) input_open = false;
    }
  }
}

// Stops the child's whole group: SIGTERM and SIGINT, then SIGKILL after 2 s. Returns
// the child's status.
int StopGroup(pid_t child) {
  kill(-child, SIGTERM);
  kill(-child, SIGINT);  // a keel role takes a lone SIGTERM as a preemption notice
  const double deadline = MonotonicSeconds() + 2;
  int status = 0;
  while (MonotonicSeconds() < deadline) {
    if (waitpid(child, &status, WNOHANG) == child) {
      kill(-child, SIGKILL);  // whatever it started
      return status;
    }
    usleep(20000);
  }
  kill(-child, SIGKILL);
  waitpid(child, &status, 0);
  return status;
}

// Reads a cluster secret's text from standard input, up to its closing blank
// line (byte by byte: what follows is the connection's end-of-file, which
// WaitWhileInputOpen watches). Throws Error if it is not there in 30 s.
std::string ReadSecretFromInput() {
  std::string text;
  const double deadline = MonotonicSeconds() + 30;
  while (text.size() < 4096 && text.find("\n\n") == std::string::npos) {
    pollfd input{STDIN_FILENO, POLLIN, 0};
    const int wait_ms = static_cast<int>((deadline - MonotonicSeconds()) * 1000);
    if (wait_ms <= 0 || poll(&input, 1, wait_ms) <= 0) {
      throw MakeError("keel guard: no cluster secret on standard input within 30 s");
    }
    char c = 0;
    const ssize_t n = read(STDIN_FILENO, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw MakeError("keel guard: standard input ended before the cluster secret did");
    text += c;
  }
  ParseClusterSecret(text, "keel guard: the cluster secret on standard input");
  return text;
}

// Writes `text` to a new file only this user can read (mkstemp makes it
// 0600) in $TMPDIR or /tmp; returns its path.
std::string WritePrivateFile(const std::string& text) {
  const char* folder = getenv("TMPDIR");
  std::string path = std::string(folder && *folder ? folder : "/tmp") + "/keel-secret-XXXXXX";
  const int fd = mkstemp(&path[0]);
  if (fd < 0) throw MakeError("keel guard: cannot create ", path, ": ", strerror(errno));
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!written) {
    unlink(path.c_str());
    throw MakeError("keel guard: cannot write ", path);
  }
  return path;
}

// Runs `command` under guard (RunGuard without the secret).
int RunGuarded(const std::vector<std::string>& command) {
  struct sigaction action {};
  action.sa_handler = OnGuardSignal;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGHUP, SIGINT, SIGTERM}) sigaction(signal, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);
  const pid_t child = StartGuarded(command);
  int status = 0;
  if (WaitWhileInputOpen(child, &status)) return StatusCode(status);
  // The connection closed or a signal came: stop the whole group.
  return StatusCode(StopGroup(child));
}

}  // namespace

int RunGuard(const std::vector<std::string>& command, bool secret_from_stdin) {
  if (command.empty()) throw MakeError("keel guard: say what to run: keel guard -- COMMAND...");
  if (!secret_from_stdin) return RunGuarded(command);
  const std::string secret_file = WritePrivateFile(ReadSecretFromInput());
  setenv("KEEL_SECRET_FILE", secret_file.c_str(), 1);
  int code = 1;
  try {
    code = RunGuarded(command);
  } catch (...) {
    unlink(secret_file.c_str());
    throw;
  }
  unlink(secret_file.c_str());
  return code;
}

}  // namespace keel
