// Helpers for tests that start processes: every process is tracked by PID,
// every wait is bounded, and whatever is still running at the end is killed.
#ifndef KEEL_TESTS_TEST_UTIL_H_
#define KEEL_TESTS_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "kv/node.h"

namespace keel::testing {

// The keel binary under test.
inline std::string KeelBinary() { return KEEL_BINARY; }

struct Exit {
  bool finished = false;  // false: still running at the deadline (then killed)
  int code = -1;          // exit status, or 128 + signal
  double seconds = 0;
  std::string output;  // stdout and stderr together
};

class Processes {
 public:
  Processes();
  ~Processes();  // kills (SIGKILL) and reaps every process still running

  // Starts `argv` with stdout and stderr captured to a file.
  pid_t Start(const std::vector<std::string>& argv);
  // Forks; the child runs `body` and exits with its return value (1 if it
  // throws). Call before this process starts threads.
  pid_t Fork(const std::function<int()>& body);
  // Waits up to `timeout_s` for `pid`; kills it if it is still running.
  Exit Wait(pid_t pid, double timeout_s);
  // Output captured so far.
  std::string Output(pid_t pid) const;

 private:
  struct Process {
    pid_t pid;
    std::string log;
    bool reaped = false;
    double started = 0;
  };
  Process* Find(pid_t pid);
  std::string folder_;
  std::vector<Process> processes_;
};

// Runs `argv` to completion (bounded by `timeout_s`).
Exit Run(const std::vector<std::string>& argv, double timeout_s);

// Options for a node of `role` on loopback joining the scheduler at
// 127.0.0.1:`scheduler_port`.
NodeOptions LocalNode(proto::Role role, int scheduler_port, double heartbeat_interval_s = 1);

// A TCP port on 127.0.0.1 that nothing listens on right now.
int UnusedPort();

// PIDs of running processes whose command line contains `marker`.
std::vector<pid_t> ProcessesMentioning(const std::string& marker);

// Waits up to `timeout_s` for `condition`, checking every 10 ms.
bool WaitFor(const std::function<bool()>& condition, double timeout_s);

// The message of the keel::Error `body` throws, or "no error".
std::string ErrorOf(const std::function<void()>& body);

inline bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The whole file ("" if it cannot be read).
std::string ReadFile(const std::string& path);

// The example counts of every "epoch N: X examples across" line the leading
// worker prints: what all workers read in each epoch.
std::vector<long> ExamplesPerEpoch(const std::string& output);

// A fixture with a fresh folder under /tmp, removed with its files at the end.
class TempFolderTest : public ::testing::Test {
 protected:
  TempFolderTest();
  ~TempFolderTest() override;
  // Writes `contents` to folder/name and returns the path.
  std::string WriteFile(const std::string& name, const std::string& contents);

  std::string folder_;
};

}  // namespace keel::testing

#endif  // KEEL_TESTS_TEST_UTIL_H_
