#include "test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "base/error.h"
#include "base/time.h"
#include "kv/node.h"

namespace keel::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Processes::Processes() {
  char folder[] = "/tmp/keel-test-XXXXXX";
  if (!mkdtemp(folder)) std::abort();
  folder_ = folder;
}

Processes::~Processes() {
  for (Process& process : processes_) {
    if (process.reaped) continue;
    kill(process.pid, SIGKILL);
    waitpid(process.pid, nullptr, 0);
  }
  for (Process& process : processes_) unlink(process.log.c_str());
  rmdir(folder_.c_str());
}

Processes::Process* Processes::Find(pid_t pid) {
  for (Process& process : processes_) {
    if (process.pid == pid) return &process;
  }
  return nullptr;
}

pid_t Processes::Start(const std::vector<std::string>& argv) {
  const std::string log = folder_ + "/" + std::to_string(processes_.size()) + ".log";
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  processes_.push_back({pid, log, false, MonotonicSeconds()});
  return pid;
}

pid_t Processes::Fork(const std::function<int()>& body) {
  const std::string log = folder_ + "/" + std::to_string(processes_.size()) + ".log";
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    int code = 1;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::cerr << "uncaught: " << e.what() << std::endl;
    }
    std::cout.flush();
    std::cerr.flush();
    _exit(code);
  }
  processes_.push_back({pid, log, false, MonotonicSeconds()});
  return pid;
}

Exit Processes::Wait(pid_t pid, double timeout_s) {
  Exit exit;
  Process* process = Find(pid);
  if (!process || process->reaped) return exit;
  int status = 0;
  const double deadline = MonotonicSeconds() + timeout_s;
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && MonotonicSeconds() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  } else {
    exit.finished = true;
  }
  process = Find(pid);
  process->reaped = true;
  exit.seconds = MonotonicSeconds() - process->started;
  exit.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  exit.output = ReadAll(process->log);
  return exit;
}

std::string Processes::Output(pid_t pid) const {
  for (const Process& process : processes_) {
    if (process.pid == pid) return ReadAll(process.log);
  }
  return "";
}

Exit Run(const std::vector<std::string>& argv, double timeout_s) {
  Processes processes;
  return processes.Wait(processes.Start(argv), timeout_s);
}

NodeOptions LocalNode(proto::Role role, int scheduler_port, double heartbeat_interval_s) {
  NodeOptions options;
  options.role = role;
  options.scheduler = "127.0.0.1:" + std::to_string(scheduler_port);
  options.bind_host = "127.0.0.1";
  options.register_timeout_s = 10;
  options.heartbeat_interval_s = heartbeat_interval_s;
  return options;
}

int UnusedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

std::vector<pid_t> ProcessesMentioning(const std::string& marker) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (!proc) return found;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0 || pid == getpid()) continue;
    std::string command = ReadAll("/proc/" + std::string(entry->d_name) + "/cmdline");
    // A zombie has an empty command line; anything else alive shows its arguments.
    if (command.find(marker) != std::string::npos) found.push_back(pid);
  }
  closedir(proc);
  return found;
}

std::string ErrorOf(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

TempFolderTest::TempFolderTest() {
  char pattern[] = "/tmp/keel-test-folder-XXXXXX";
  if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
  folder_ = pattern;
}

TempFolderTest::~TempFolderTest() { std::filesystem::remove_all(folder_); }

std::string TempFolderTest::WriteFile(const std::string& name, const std::string& contents) {
  const std::string path = folder_ + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

bool WaitFor(const std::function<bool()>& condition, double timeout_s) {
  const double deadline = MonotonicSeconds() + timeout_s;
  while (MonotonicSeconds() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<long> ExamplesPerEpoch(const std::string& output) {
  std::vector<long> counts;
  const std::regex line("epoch [0-9]+: ([0-9]+) examples across");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    counts.push_back(std::stol((*it)[1]));
  }
  return counts;
}

}  // namespace keel::testing
