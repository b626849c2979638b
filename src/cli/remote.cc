#include "cli/remote.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "base/error.h"
#include "base/time.h"
#include "cli/launcher.h"
#include "kv/node.h"

extern char** environ;

namespace keel {
namespace {

int ParseCount(const std::string& text, const std::string& where) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 0 || value > 100000) {
    throw MakeError(where, "'", text, "' is not a count");
  }
  return static_cast<int>(value);
}

// Runs `argv` and returns its standard output; throws Error if it fails.
std::string ReadCommand(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& arg : argv) line += (line.empty() ? "" : " ") + ShellQuote(arg);
  FILE* pipe = popen(line.c_str(), "r");  // its errors go to this task's stderr
  if (!pipe) throw MakeError("cannot run ", line);
  std::string output;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0) throw MakeError(line, " failed (its error is above)");
  return output;
}

std::string RequireEnv(const std::map<std::string, std::string>& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) {
    throw MakeError(name, " is not set: keel launch --slurm runs as a task of srun");
  }
  return it->second;
}

volatile sig_atomic_t guard_signal = 0;
void OnGuardSignal(int signal) { guard_signal = signal; }

}  // namespace

std::string ShellQuote(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789_-+=/.,:@%") == std::string::npos) {
    return text;
  }
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::vector<HostEntry> ParseHostfile(const std::string& text, const std::string& path) {
  std::vector<HostEntry> hosts;
  std::istringstream lines(text);
  std::string line;
  int number = 0, schedulers = 0, servers = 0, workers = 0;
  while (std::getline(lines, line)) {
    ++number;
    const std::string where = path + ":" + std::to_string(number) + ": ";
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string word;
    if (!(words >> word)) continue;
    HostEntry entry;
    entry.line = number;
    entry.ssh_target = word;
    const size_t colon = word.rfind(':');
    if (colon != std::string::npos) {
      entry.ssh_target = word.substr(0, colon);
      entry.ssh_port = ParseCount(word.substr(colon + 1), where + "ssh port ");
      if (entry.ssh_port < 1 || entry.ssh_port > 65535) {
        throw MakeError(where, "ssh port ", entry.ssh_port, " is not in 1..65535");
      }
    }
    const size_t at = entry.ssh_target.find('@');
    entry.host = at == std::string::npos ? entry.ssh_target : entry.ssh_target.substr(at + 1);
    if (entry.host.empty()) throw MakeError(where, "'", word, "' names no host");
    entry.address = entry.host;
    while (words >> word) {
      const size_t equals = word.find('=');
      const std::string key = word.substr(0, equals);
      const std::string value = equals == std::string::npos ? "" : word.substr(equals + 1);
      if (word.rfind("--", 0) == 0 && word.size() > 2) {
        entry.flags.push_back(word);
      } else if (word == "scheduler") {
        entry.scheduler = true;
      } else if (key == "servers" && equals != std::string::npos) {
        entry.servers = ParseCount(value, where + "servers=");
      } else if (key == "workers" && equals != std::string::npos) {
        entry.workers = ParseCount(value, where + "workers=");
      } else if (key == "address" && !value.empty()) {
        entry.address = value;
      } else {
        throw MakeError(where, "'", word,
                        "' is not scheduler, servers=N, workers=N, address=HOST or --flag");
      }
    }
    if (!entry.scheduler && entry.servers == 0 && entry.workers == 0) {
      throw MakeError(where, entry.host, " runs no role (say scheduler, servers=N or workers=N)");
    }
    schedulers += entry.scheduler;
    servers += entry.servers;
    workers += entry.workers;
    hosts.push_back(entry);
  }
  if (schedulers != 1) {
    throw MakeError(path, ": ", schedulers, " hosts run the scheduler; exactly one must");
  }
  if (servers < 1 || workers < 1) {
    throw MakeError(path, ": the job needs at least one server and one worker (", servers,
                    " server(s), ", workers, " worker(s))");
  }
  return hosts;
}

int RunSshLaunch(const SshLaunch& launch) {
  int servers = 0, workers = 0;
  const HostEntry* scheduler_host = nullptr;
  for (const HostEntry& host : launch.hosts) {
    servers += host.servers;
    workers += host.workers;
    if (host.scheduler) scheduler_host = &host;
  }
  if (!scheduler_host) throw MakeError("no host runs the scheduler");

  ProcessGroup group;
  auto spawn = [&](const HostEntry& host, const std::string& name,
                   std::vector<std::string> role_argv) {
    role_argv.insert(role_argv.end(), launch.role_flags.begin(), launch.role_flags.end());
    role_argv.insert(role_argv.end(), host.flags.begin(), host.flags.end());
    std::vector<std::string> argv = {"ssh"};
    argv.insert(argv.end(), launch.ssh_options.begin(), launch.ssh_options.end());
    argv.insert(argv.end(), {"-o", "BatchMode=yes", "-o", "ConnectTimeout=15"});
    if (host.ssh_port) argv.insert(argv.end(), {"-p", std::to_string(host.ssh_port)});
    argv.push_back(host.ssh_target);
    argv.push_back("--");
    std::string command;
    if (!launch.remote_folder.empty()) {
      command = "cd " + ShellQuote(launch.remote_folder) + " 2>/dev/null; ";
    }
    command += "exec " + ShellQuote(launch.remote_keel) + " guard --";
    role_argv.insert(role_argv.begin(), launch.remote_keel);
    for (const auto& arg : role_argv) command += " " + ShellQuote(arg);
    argv.push_back(command);
    group.Spawn(host.host + " " + name, argv, /*stdin_pipe=*/true);
  };

  const std::string scheduler_name = scheduler_host->host + " scheduler";
  int port = 0;
  group.SetLineHandler([&](const std::string& name, const std::string& line) {
    int found = 0;
    if (name == scheduler_name && sscanf(line.c_str(), "scheduler port %d", &found) == 1) {
      port = found;
    }
  });
  spawn(*scheduler_host, "scheduler",
        {"scheduler", "--bind=0.0.0.0", "--port=" + std::to_string(launch.scheduler_port),
         "--port_file=-", "--num_servers=" + std::to_string(servers),
         "--num_workers=" + std::to_string(workers)});
  if (!group.Pump(60, [&] { return port > 0; })) {
    group.StopAll();
    if (Interrupted()) return 130;
    throw MakeError("the scheduler on ", scheduler_host->host,
                    " did not start within 60 s (see its output above)");
  }
  const std::string scheduler = scheduler_host->address + ":" + std::to_string(port);
  LOG(INFO) << "scheduler on " << scheduler_host->host << " at " << scheduler;

  int server_rank = 0, worker_rank = 0;
  for (const HostEntry& host : launch.hosts) {
    for (int i = 0; i < host.servers; ++i, ++server_rank) {
      std::vector<std::string> argv = {"server", "--scheduler=" + scheduler,
                                       "--rank=" + std::to_string(server_rank)};
      if (host.address != host.host) argv.push_back("--advertise=" + host.address);
      spawn(host, "server " + std::to_string(server_rank), argv);
    }
    for (int i = 0; i < host.workers; ++i, ++worker_rank) {
      std::vector<std::string> argv = {"worker", "--scheduler=" + scheduler,
                                       "--rank=" + std::to_string(worker_rank)};
      if (host.address != host.host) argv.push_back("--advertise=" + host.address);
      spawn(host, "worker " + std::to_string(worker_rank), argv);
    }
  }
  return group.Wait(launch.timeout_s);
}

SlurmTask ResolveSlurmTask(const std::map<std::string, std::string>& env, int servers, int port,
                           const std::vector<std::string>& nodelist_hosts,
                           const std::string& first_host_address) {
  const int task = ParseCount(RequireEnv(env, "SLURM_PROCID"), "SLURM_PROCID ");
  const int tasks = ParseCount(RequireEnv(env, "SLURM_NTASKS"), "SLURM_NTASKS ");
  if (servers < 1) throw MakeError("--servers must be at least 1");
  if (tasks < servers + 2) {
    throw MakeError("the step has ", tasks, " task(s): a scheduler, ", servers,
                    " server(s) and at least one worker need ", servers + 2);
  }
  if (nodelist_hosts.empty()) throw MakeError("SLURM_JOB_NODELIST names no host");
  if (port == 0) {
    // Derived from the job id, so two jobs on one node do not collide.
    const std::string id = RequireEnv(env, "SLURM_JOB_ID");
    char* end = nullptr;
    const unsigned long long job = std::strtoull(id.c_str(), &end, 10);
    if (*end != '\0') throw MakeError("SLURM_JOB_ID '", id, "' is not a number");
    port = 20000 + static_cast<int>(job % 20000);
  }
  SlurmTask result;
  result.servers = servers;
  result.workers = tasks - 1 - servers;
  result.node_name = nodelist_hosts.front();
  result.scheduler = first_host_address + ":" + std::to_string(port);
  if (task == 0) {
    result.role = "scheduler";
  } else if (task <= servers) {
    result.role = "server";
    result.rank = task - 1;
  } else {
    result.role = "worker";
    result.rank = task - 1 - servers;
  }
  return result;
}

int RunSlurmTask(const std::string& self, int servers, int port,
                 const std::vector<std::string>& role_flags) {
  std::map<std::string, std::string> env;
  for (char** entry = environ; *entry; ++entry) {
    const std::string text = *entry;
    const size_t equals = text.find('=');
    if (text.rfind("SLURM_", 0) == 0 && equals != std::string::npos) {
      env[text.substr(0, equals)] = text.substr(equals + 1);
    }
  }
  const std::string nodelist = RequireEnv(env, "SLURM_JOB_NODELIST");
  std::vector<std::string> hosts;
  std::istringstream names(ReadCommand({"scontrol", "show", "hostnames", nodelist}));
  for (std::string name; names >> name;) hosts.push_back(name);
  if (hosts.empty()) throw MakeError("scontrol show hostnames ", nodelist, " named no host");
  // The address Slurm itself reaches the node at (NodeAddr), else its name.
  std::string address = hosts.front();
  std::istringstream fields(ReadCommand({"scontrol", "show", "node", "-o", hosts.front()}));
  for (std::string field; fields >> field;) {
    if (field.rfind("NodeAddr=", 0) == 0 && field.size() > 9) address = field.substr(9);
  }
  const SlurmTask task = ResolveSlurmTask(env, servers, port, hosts, address);
  std::vector<std::string> argv = {self, task.role};
  if (task.role == "scheduler") {
    argv.insert(argv.end(),
                {"--bind=0.0.0.0", "--port=" + task.scheduler.substr(task.scheduler.rfind(':') + 1),
                 "--num_servers=" + std::to_string(task.servers),
                 "--num_workers=" + std::to_string(task.workers)});
  } else {
    argv.insert(argv.end(),
                {"--scheduler=" + task.scheduler, "--rank=" + std::to_string(task.rank)});
  }
  argv.insert(argv.end(), role_flags.begin(), role_flags.end());
  LOG(INFO) << "slurm task " << env["SLURM_PROCID"] << " of " << env["SLURM_NTASKS"] << " on node "
            << env["SLURM_NODEID"] << ": " << task.role
            << (task.role == "scheduler" ? "" : " " + std::to_string(task.rank)) << ", scheduler "
            << task.scheduler << " (" << task.node_name << ")";
  std::vector<char*> args;
  for (auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  fflush(stdout);
  fflush(stderr);
  execv(self.c_str(), args.data());
  throw MakeError("cannot run ", self, ": ", strerror(errno));
}

int RunGuard(const std::vector<std::string>& command) {
  if (command.empty()) throw MakeError("keel guard: say what to run: keel guard -- COMMAND...");
  struct sigaction action {};
  action.sa_handler = OnGuardSignal;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGHUP, SIGINT, SIGTERM}) sigaction(signal, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);
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
    std::vector<char*> args;
    for (const auto& arg : command) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    fprintf(stderr, "keel guard: cannot run %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  setpgid(child, child);  // also here, so the group exists before any kill
  auto status_code = [](int status) {
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  };
  bool input_open = true;
  while (true) {
    int status = 0;
    if (waitpid(child, &status, WNOHANG) == child) return status_code(status);
    if (guard_signal || !input_open) break;
    pollfd input{STDIN_FILENO, POLLIN, 0};
    if (poll(&input, 1, 200) > 0) {
      char buffer[512];
      const ssize_t n = read(STDIN_FILENO, buffer, sizeof(buffer));
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) input_open = false;
    }
  }
  // The connection closed or a signal came: stop the whole group.
  kill(-child, SIGTERM);
  const double deadline = MonotonicSeconds() + 2;
  int status = 0;
  while (MonotonicSeconds() < deadline) {
    if (waitpid(child, &status, WNOHANG) == child) {
      kill(-child, SIGKILL);  // whatever it started
      return status_code(status);
    }
    usleep(20000);
  }
  kill(-child, SIGKILL);
  waitpid(child, &status, 0);
  return status_code(status);
}

}  // namespace keel
