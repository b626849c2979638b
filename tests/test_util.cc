#include "test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "base/json_reader.h"
#include "base/time.h"
#include "io/recordio.h"
#include "kv/node.h"
#include "launch/ports.h"

namespace keel::testing {
namespace {

// Sends the calling (child) process's stdout and stderr to `log`.
void RedirectOutputTo(const std::string& log) {
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, STDOUT_FILENO);
  dup2(fd, STDERR_FILENO);
}

int ExitCodeOf(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::string KeelBinary() { return KEEL_BINARY; }

std::string SourceDir() { return KEEL_SOURCE_DIR; }

// --- Processes --------------------------------------------------------------

Processes::Processes() : folder_("processes") {}

Processes::~Processes() {
  for (Process& process : processes_) {
    if (process.reaped) continue;
    kill(process.pid, SIGKILL);
    waitpid(process.pid, nullptr, 0);
  }
}

Processes::Process* Processes::Find(pid_t pid) {
  for (Process& process : processes_) {
    if (process.pid == pid) return &process;
  }
  return nullptr;
}

pid_t Processes::Start(const std::vector<std::string>& argv) {
  const std::string log = folder_.path() + "/" + std::to_string(processes_.size()) + ".log";
  const pid_t pid = fork();
  if (pid == 0) {
    RedirectOutputTo(log);
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  processes_.push_back({pid, log, false, 0});
  return pid;
}

pid_t Processes::Fork(const std::function<int()>& body) {
  const std::string log = folder_.path() + "/" + std::to_string(processes_.size()) + ".log";
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid == 0) {
    RedirectOutputTo(log);
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
  processes_.push_back({pid, log, false, 0});
  return pid;
}

bool Processes::Exited(pid_t pid) {
  Process* process = Find(pid);
  if (!process) return false;
  if (!process->reaped && waitpid(pid, &process->status, WNOHANG) == pid) process->reaped = true;
  return process->reaped;
}

Exit Processes::Wait(pid_t pid, double timeout_s) {
  Exit exit;
  Process* process = Find(pid);
  if (!process) return exit;
  exit.finished = WaitFor([&] { return Exited(pid); }, timeout_s);
  if (!exit.finished) {
    kill(pid, SIGKILL);
    waitpid(pid, &process->status, 0);
    process->reaped = true;
  }
  exit.code = ExitCodeOf(process->status);
  exit.output = ReadFileOrEmpty(process->log);
  return exit;
}

std::string Processes::Output(pid_t pid) const {
  for (const Process& process : processes_) {
    if (process.pid == pid) return ReadFileOrEmpty(process.log);
  }
  return "";
}

Exit Run(const std::vector<std::string>& argv, double timeout_s) {
  Processes processes;
  return processes.Wait(processes.Start(argv), timeout_s);
}

std::vector<std::string> LaunchCommand(int servers, int workers,
                                       const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {KeelBinary(), "launch", "--servers=" + std::to_string(servers),
                                   "--workers=" + std::to_string(workers)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

Exit GenerateLinearData(const std::string& out, int rows, int seed) {
  return Run({KeelBinary(), "datagen", "--model=linear", "--rows=" + std::to_string(rows),
              "--features=2000", "--nnz=10", "--seed=" + std::to_string(seed), "--out=" + out},
             60);
}

Exit Shell(const std::string& command, double timeout_s) {
  return Run({"/bin/sh", "-c", command}, timeout_s);
}

std::string SystemTool(const std::string& name) {
  for (const char* folder : {"/usr/sbin/", "/usr/bin/", "/sbin/", "/bin/"}) {
    const std::string path = folder + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

std::vector<pid_t> ProcessesMentioning(const std::string& marker) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (!proc) return found;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0 || pid == getpid()) continue;
    std::string command = ReadFileOrEmpty("/proc/" + std::string(entry->d_name) + "/cmdline");
    // A zombie has an empty command line; anything else alive shows its arguments.
    if (command.find(marker) != std::string::npos) found.push_back(pid);
  }
  closedir(proc);
  return found;
}

// --- Nodes on loopback ------------------------------------------------------

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
  // Below the ephemeral range: no socket binding port 0 takes it meanwhile.
  return FreeLocalPorts(1).front();
}

int ConnectToLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int ListenOnLoopback(int backlog, int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(address.sin_port);
  return fd;
}

// --- Waiting and errors -----------------------------------------------------

bool WaitFor(const std::function<bool()>& condition, double timeout_s) {
  const double deadline = MonotonicSeconds() + timeout_s;
  while (MonotonicSeconds() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

std::string WaitForPortFile(const std::string& path, double timeout_s) {
  std::string port;
  WaitFor(
      [&] {
        std::ifstream in(path);
        return static_cast<bool>(in >> port);
      },
      timeout_s);
  return port;
}

namespace {

// The message of the keel::Error `body` throws, if it throws one.
std::optional<std::string> ErrorMessage(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return std::string(error.what());
  }
  return std::nullopt;
}

}  // namespace

std::string ErrorOf(const std::function<void()>& body) {
  return ErrorMessage(body).value_or("no error");
}

std::string ErrorOrEmpty(const std::function<void()>& body) {
  return ErrorMessage(body).value_or("");
}

size_t CountOf(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++count;
  }
  return count;
}

// --- Files ------------------------------------------------------------------

uint64_t Fnv1a64(const std::string& bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : bytes) hash = (hash ^ byte) * 0x100000001b3ULL;
  return hash;
}

TempFolder::TempFolder(const std::string& purpose) {
  std::string pattern = "/tmp/keel-" + purpose + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    throw MakeError("cannot create a folder ", pattern, ": ", strerror(errno));
  }
  path_ = pattern;
}

TempFolder::~TempFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempFolderTest::WriteFile(const std::string& name, const std::string& contents) {
  const std::string path = folder_ + "/" + name;
  testing::WriteFile(path, contents);
  return path;
}

mode_t ModeOf(const std::string& path) {
  struct stat status {};
  EXPECT_EQ(stat(path.c_str(), &status), 0) << path;
  return status.st_mode & 07777;
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// --- What a job writes ------------------------------------------------------

std::map<std::string, std::string> ParseJsonObject(const std::string& text) {
  const JsonValue document = ParseJson(text, "JSON object");
  std::map<std::string, std::string> members;
  for (const auto& [name, value] : document.AsObject()) {
    members[name] = value.type() == JsonValue::Type::kString
                        ? value.AsString()
                        : text.substr(value.offset(), value.end() - value.offset());
  }
  return members;
}

std::vector<std::map<std::string, std::string>> ReadJsonLines(const std::string& path) {
  std::vector<std::map<std::string, std::string>> lines;
  const std::string text = ReadFileOrEmpty(path);
  // Only whole lines: a process may be writing the last one right now.
  for (size_t begin = 0, end; (end = text.find('\n', begin)) != std::string::npos;
       begin = end + 1) {
    if (end > begin) lines.push_back(ParseJsonObject(text.substr(begin, end - begin)));
  }
  return lines;
}

std::vector<std::map<std::string, std::string>> EventsNamed(const std::string& path,
                                                            const std::string& event) {
  std::vector<std::map<std::string, std::string>> found;
  for (auto& line : ReadJsonLines(path)) {
    if (line["event"] == event) found.push_back(std::move(line));
  }
  return found;
}

std::map<std::string, double> ParseMetrics(const std::string& json) {
  std::map<std::string, double> metrics;
  for (const auto& [name, value] : ParseJsonObject(json)) {
    metrics[name] = value == "null" ? std::nan("") : std::stod(value);
  }
  return metrics;
}

std::map<std::string, double> ReadMetrics(const std::string& path) {
  return ParseMetrics(ReadFileOrEmpty(path));
}

double MetricOf(const std::string& path, const std::string& name) {
  const auto metrics = ReadMetrics(path);
  const auto found = metrics.find(name);
  return found == metrics.end() ? std::nan("") : found->second;
}

size_t CountLines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

size_t CountLinesInFolder(const std::string& folder) {
  size_t lines = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    lines += CountLines(ReadFileOrEmpty(entry.path()));
  }
  return lines;
}

std::vector<long> ExamplesPerEpoch(const std::string& output) {
  std::vector<long> counts;
  for (const std::string& count : FirstGroups(output, "epoch [0-9]+: ([0-9]+) examples across")) {
    counts.push_back(std::stol(count));
  }
  return counts;
}

std::vector<std::string> FirstGroups(const std::string& text, const std::string& pattern) {
  std::vector<std::string> groups;
  const std::regex expression(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), expression);
       it != std::sregex_iterator(); ++it) {
    groups.push_back((*it)[1]);
  }
  return groups;
}

std::string RecordIOBody(const std::vector<aialgs::data::Record>& records) {
  std::ostringstream out;
  RecordIOWriter writer(&out);
  for (const aialgs::data::Record& record : records) writer.Write(record);
  writer.Flush();
  return out.str();
}

}  // namespace keel::testing
