// Helpers shared by the tests: processes started and tracked by PID (every
// wait bounded, whatever still runs at the end killed), temporary folders,
// waits on observable conditions, and readers for the structured files a job
// writes (metrics.json, the JSON-lines event and membership logs).
#ifndef KEEL_TESTS_TEST_UTIL_H_
#define KEEL_TESTS_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kv/node.h"
#include "record.pb.h"

namespace keel::testing {

// The keel binary under test. (Its path and the source tree's are compiled
// into test_util.cc alone: a test's own object holds no path of its clone, so
// another clone's compiler cache serves it.)
std::string KeelBinary();

// The root of the source tree (for files the tests read: deploy/, tests/).
std::string SourceDir();

// ---------------------------------------------------------------------------
// Temporary folders (the fixture, TempFolderTest, is under Files below)

// A fresh folder /tmp/keel-`purpose`-XXXXXX, removed with everything in it
// when this object ends. Throws keel::Error if it cannot be made.
class TempFolder {
 public:
  explicit TempFolder(const std::string& purpose = "test");
  ~TempFolder();
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// ---------------------------------------------------------------------------
// Processes

struct Exit {
  bool finished = false;  // false: still running at the deadline (then killed)
  int code = -1;          // exit status, or 128 + signal
  std::string output;     // stdout and stderr together
};

// The processes a test starts. Not thread-safe.
class Processes {
 public:
  Processes();
  ~Processes();  // kills (SIGKILL) and reaps every process still running
  Processes(const Processes&) = delete;
  Processes& operator=(const Processes&) = delete;

  // Starts `argv` with stdout and stderr captured to a file.
  pid_t Start(const std::vector<std::string>& argv);
  // Forks; the child runs `body` and exits with its return value (1 if it
  // throws). Call before this process starts threads.
  pid_t Fork(const std::function<int()>& body);
  // Waits up to `timeout_s` for `pid`; kills it if it is still running.
  Exit Wait(pid_t pid, double timeout_s);
  // True once `pid` has exited (reaps it then; Wait still gives its Exit).
  bool Exited(pid_t pid);
  // Output captured so far.
  std::string Output(pid_t pid) const;

 private:
  struct Process {
    pid_t pid;
    std::string log;
    bool reaped = false;
    int status = 0;  // waitpid's, once reaped
  };
  Process* Find(pid_t pid);
  TempFolder folder_;  // the captured output
  std::vector<Process> processes_;
};

// Runs `argv` to completion (bounded by `timeout_s`).
Exit Run(const std::vector<std::string>& argv, double timeout_s);

// `keel launch` of `servers` servers and `workers` workers, then `flags`.
std::vector<std::string> LaunchCommand(int servers, int workers,
                                       const std::vector<std::string>& flags);

// Runs `keel datagen` of a linear model's data, `rows` rows of 2000 features
// (10 of them set) from `seed`, into folder `out` (bounded by 60 s).
Exit GenerateLinearData(const std::string& out, int rows, int seed);

// Runs `command` with /bin/sh, bounded.
Exit Shell(const std::string& command, double timeout_s = 30);

// The absolute path of system tool `name` (looked for in /usr/sbin, /usr/bin,
// /sbin, /bin), or "" if it is not installed.
std::string SystemTool(const std::string& name);

// PIDs of running processes whose command line contains `marker`.
std::vector<pid_t> ProcessesMentioning(const std::string& marker);

// ---------------------------------------------------------------------------
// Nodes on loopback

// Options for a node of `role` on loopback joining the scheduler at
// 127.0.0.1:`scheduler_port`.
NodeOptions LocalNode(proto::Role role, int scheduler_port, double heartbeat_interval_s = 1);

// A TCP port on 127.0.0.1 that nothing listens on right now, below the
// ephemeral range where there is room (FreeLocalPorts).
int UnusedPort();

// A TCP socket connected to 127.0.0.1:`port` (the caller closes it), or -1
// if none can be.
int ConnectToLoopback(int port);

// A TCP socket listening on 127.0.0.1 at a port of the kernel's choosing,
// `backlog` connections long (the caller closes it), its port in *port; -1
// if none can be made.
int ListenOnLoopback(int backlog, int* port);

// ---------------------------------------------------------------------------
// Waiting and errors

// Waits up to `timeout_s` for `condition`, checking every 10 ms. The timeout
// only bounds a hang: pass one far above what the condition needs.
bool WaitFor(const std::function<bool()>& condition, double timeout_s);

// Waits up to `timeout_s` for the port a scheduler writes to its --port_file
// `path`; returns it, or "" if none came.
std::string WaitForPortFile(const std::string& path, double timeout_s);

// The message of the keel::Error `body` throws, or "no error".
std::string ErrorOf(const std::function<void()>& body);

// The message of the keel::Error `body` throws, or "" if it throws none.
std::string ErrorOrEmpty(const std::function<void()>& body);

inline bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// How many times `part` occurs in `text` (overlapping occurrences too).
size_t CountOf(const std::string& text, const std::string& part);

// ---------------------------------------------------------------------------
// Files

// A fixture with a fresh folder `folder_`, removed with its files at the end.
class TempFolderTest : public ::testing::Test {
 protected:
  explicit TempFolderTest(const std::string& purpose = "test") : temp_folder_(purpose) {}

  // Writes `contents` to folder_/name and returns the path.
  std::string WriteFile(const std::string& name, const std::string& contents);

  TempFolder temp_folder_;
  const std::string folder_ = temp_folder_.path();
};

// The permission bits of the file at `path` (a failed stat fails the test).
mode_t ModeOf(const std::string& path);

// A TempFolderTest whose folder_/data holds, from SetUp on, a linear model's
// data from `seed` (GenerateLinearData, 20000 rows): for launched jobs.
class LinearDataTest : public TempFolderTest {
 protected:
  LinearDataTest(const std::string& purpose, int seed) : TempFolderTest(purpose), seed_(seed) {}
  void SetUp() override {
    const auto exit = GenerateLinearData(folder_ + "/data", 20000, seed_);
    ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  }

 private:
  const int seed_;
};

// 64-bit FNV-1a as published (offset basis 0xcbf29ce484222325, prime
// 0x100000001b3): the checksum Keel's files end with, written here
// independently of the code under test.
uint64_t Fnv1a64(const std::string& bytes);

// Writes `contents` to `path` (replacing it). (Inside a TempFolderTest, call
// it as testing::WriteFile: the fixture's WriteFile takes a name in folder_.)
void WriteFile(const std::string& path, const std::string& contents);

// The whole file, or "" if it does not exist (yet) or cannot be read: for
// polling a file another process writes. keel::ReadFile (base/files.h) is the
// one that throws.
std::string ReadFileOrEmpty(const std::string& path);

// ---------------------------------------------------------------------------
// What a job writes

// The members of a JSON object (base/json_reader.h's strict ParseJson; throws
// keel::Error on malformed text), by name: strings without their quotes
// (escapes undone), anything else (numbers, true, null, arrays) as written.
std::map<std::string, std::string> ParseJsonObject(const std::string& text);

// The lines of a JSON-lines file (the launcher's --event_log, the scheduler's
// --membership_log), each parsed by ParseJsonObject; none if it does not exist.
// Only whole lines count: a line still being written (no newline yet) is left
// for the next read.
std::vector<std::map<std::string, std::string>> ReadJsonLines(const std::string& path);

// The lines of ReadJsonLines(path) whose "event" is `event`.
std::vector<std::map<std::string, std::string>> EventsNamed(const std::string& path,
                                                            const std::string& event);

// The metrics in `json`, the text of a metrics.json (a flat object of
// numbers, null for not finite: NaN here).
std::map<std::string, double> ParseMetrics(const std::string& json);

// ParseMetrics of the file at `path`; empty if it does not exist.
std::map<std::string, double> ReadMetrics(const std::string& path);

// Metric `name` of metrics.json at `path`; NaN if the file or the metric is
// missing (so that it equals nothing).
double MetricOf(const std::string& path, const std::string& name);

// The lines of `text` (its newlines): the examples of a data file, the rows
// of a predictions file, the entries of a JSON-lines file.
size_t CountLines(const std::string& text);

// CountLines over every file in `folder` (what all of a channel holds).
size_t CountLinesInFolder(const std::string& folder);

// The example counts of every "epoch N: X examples across" line the leading
// worker prints: what all workers read in each epoch.
std::vector<long> ExamplesPerEpoch(const std::string& output);

// The first group of every match of regular expression `pattern` in `text`,
// in order.
std::vector<std::string> FirstGroups(const std::string& text, const std::string& pattern);

// `records` as one recordIO body (io/recordio.h), as a client sends them.
std::string RecordIOBody(const std::vector<aialgs::data::Record>& records);

}  // namespace keel::testing

#endif  // KEEL_TESTS_TEST_UTIL_H_
