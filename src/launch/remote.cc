// `keel launch --hostfile` (the hostfile, the roles over ssh) and `keel launch
// --slurm` (a task's role); `keel guard` is in guard.cc.
#include "launch/remote.h"

#include <glog/logging.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <utility>

#include "base/error.h"
#include "base/files.h"
#include "base/time.h"
#include "kv/cluster_secret.h"
#include "launch/launcher.h"
#include "launch/role_output.h"

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

// This process's SLURM_* variables.
std::map<std::string, std::string> SlurmEnvironment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; *entry; ++entry) {
    const std::string text = *entry;
    const size_t equals = text.find('=');
    if (text.rfind("SLURM_", 0) == 0 && equals != std::string::npos) {
      env[text.substr(0, equals)] = text.substr(equals + 1);
    }
  }
  return env;
}

// The hosts of a Slurm nodelist ("node[1-3]"), from scontrol. Throws Error if none.
std::vector<std::string> NodelistHosts(const std::string& nodelist) {
  std::vector<std::string> hosts;
  std::istringstream names(ReadCommand({"scontrol", "show", "hostnames", nodelist}));
  for (std::string name; names >> name;) hosts.push_back(name);
  if (hosts.empty()) throw MakeError("scontrol show hostnames ", nodelist, " named no host");
  return hosts;
}

// The address Slurm itself reaches `host` at (its NodeAddr), else its name.
std::string NodeAddress(const std::string& host) {
  std::string address = host;
  std::istringstream fields(ReadCommand({"scontrol", "show", "node", "-o", host}));
  for (std::string field; fields >> field;) {
    if (field.rfind("NodeAddr=", 0) == 0 && field.size() > 9) address = field.substr(9);
  }
  return address;
}

// The command line of `task`'s role.
std::vector<std::string> SlurmRoleCommand(const std::string& self, const SlurmTask& task,
                                          const std::vector<std::string>& role_flags) {
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
  return argv;
}

// The words after a hostfile line's host: roles, address and flags.
void ParseHostWord(const std::string& word, const std::string& where, HostEntry* entry) {
  const size_t equals = word.find('=');
  const std::string key = word.substr(0, equals);
  const std::string value = equals == std::string::npos ? "" : word.substr(equals + 1);
  if (word.rfind("--", 0) == 0 && word.size() > 2) {
    entry->flags.push_back(word);
  } else if (word == "scheduler") {
    entry->scheduler = true;
  } else if (key == "servers" && equals != std::string::npos) {
    entry->servers = ParseCount(value, where + "servers=");
  } else if (key == "workers" && equals != std::string::npos) {
    entry->workers = ParseCount(value, where + "workers=");
  } else if (key == "address" && !value.empty()) {
    entry->address = value;
  } else {
    throw MakeError(where, "'", word,
                    "' is not scheduler, servers=N, workers=N, address=HOST or --flag");
  }
}

// [user@]host[:sshport] into entry->ssh_target, ssh_port, host and address.
void ParseSshTarget(const std::string& word, const std::string& where, HostEntry* entry) {
  entry->ssh_target = word;
  const size_t colon = word.rfind(':');
  if (colon != std::string::npos) {
    entry->ssh_target = word.substr(0, colon);
    entry->ssh_port = ParseCount(word.substr(colon + 1), where + "ssh port ");
    if (entry->ssh_port < 1 || entry->ssh_port > 65535) {
      throw MakeError(where, "ssh port ", entry->ssh_port, " is not in 1..65535");
    }
  }
  const size_t at = entry->ssh_target.find('@');
  entry->host = at == std::string::npos ? entry->ssh_target : entry->ssh_target.substr(at + 1);
  if (entry->host.empty()) throw MakeError(where, "'", word, "' names no host");
  entry->address = entry->host;
}

// One hostfile line into *entry; false for a line without a host (blank or a
// comment). `where` ("PATH:LINE: ") starts its errors.
bool ParseHostLine(const std::string& text, const std::string& where, HostEntry* entry) {
  std::istringstream words(text.substr(0, text.find('#')));
  std::string word;
  if (!(words >> word)) return false;
  ParseSshTarget(word, where, entry);
  while (words >> word) ParseHostWord(word, where, entry);
  if (!entry->scheduler && entry->servers == 0 && entry->workers == 0) {
    throw MakeError(where, entry->host, " runs no role (say scheduler, servers=N or workers=N)");
  }
  return true;
}

// Requires exactly one scheduler, at least one server and at least one worker.
void CheckRoleCounts(const std::vector<HostEntry>& hosts, const std::string& path) {
  int schedulers = 0, servers = 0, workers = 0;
  for (const HostEntry& entry : hosts) {
    schedulers += entry.scheduler;
    servers += entry.servers;
    workers += entry.workers;
  }
  if (schedulers != 1) {
    throw MakeError(path, ": ", schedulers, " hosts run the scheduler; exactly one must");
  }
  if (servers < 1 || workers < 1) {
    throw MakeError(path, ": the job needs at least one server and one worker (", servers,
                    " server(s), ", workers, " worker(s))");
  }
}

// The ssh command line that runs keel with `role_argv` (then the job's and
// the host's flags) on `host`, under `keel guard` so that closing the
// connection stops it.
std::vector<std::string> SshCommand(const SshLaunch& launch, const HostEntry& host,
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
  command += "exec " + ShellQuote(launch.remote_keel) + " guard" +
             (launch.secret.empty() ? "" : " --secret_from_stdin") + " --";
  role_argv.insert(role_argv.begin(), launch.remote_keel);
  for (const auto& arg : role_argv) command += " " + ShellQuote(arg);
  argv.push_back(command);
  return argv;
}

void SpawnOverSsh(const SshLaunch& launch, const HostEntry& host, const std::string& name,
                  std::vector<std::string> role_argv, ProcessGroup* group) {
  // The secret's closing blank line tells guard where it ends.
  group->Spawn(host.host + " " + name, SshCommand(launch, host, std::move(role_argv)),
               /*stdin_pipe=*/true, launch.secret.empty() ? "" : launch.secret + "\n");
}

// Starts the scheduler on `host` and returns the port it reports; 0 if
// interrupted meanwhile. Throws Error if it does not start within 60 s.
int StartSshScheduler(const SshLaunch& launch, const HostEntry& host, int servers, int workers,
                      ProcessGroup* group) {
  const std::string scheduler_name = host.host + " scheduler";
  int port = 0;
  group->SetLineHandler([&](const std::string& name, const std::string& line) {
    int found = 0;
    if (name == scheduler_name && sscanf(line.c_str(), "scheduler port %d", &found) == 1) {
      port = found;
    }
  });
  SpawnOverSsh(launch, host, "scheduler",
               {"scheduler", "--bind=0.0.0.0", "--port=" + std::to_string(launch.scheduler_port),
                "--port_file=-", "--num_servers=" + std::to_string(servers),
                "--num_workers=" + std::to_string(workers),
                launch.show_progress ? "--progress_records" : "--noprogress_records"},
               group);
  const bool started = group->Pump(60, [&] { return port > 0; });
  group->SetLineHandler(nullptr);  // it refers to `port`
  if (!started) {
    group->StopAll();
    if (Interrupted()) return 0;
    throw MakeError("the scheduler on ", host.host,
                    " did not start within 60 s (see its output above)");
  }
  return port;
}

// Starts every host's servers and workers, ranks in the hostfile's order.
void SpawnSshRoles(const SshLaunch& launch, const std::string& scheduler, ProcessGroup* group) {
  int server_rank = 0, worker_rank = 0;
  for (const HostEntry& host : launch.hosts) {
    for (int i = 0; i < host.servers; ++i, ++server_rank) {
      std::vector<std::string> argv = {"server", "--scheduler=" + scheduler,
                                       "--rank=" + std::to_string(server_rank)};
      if (host.address != host.host) argv.push_back("--advertise=" + host.address);
      SpawnOverSsh(launch, host, "server " + std::to_string(server_rank), argv, group);
    }
    for (int i = 0; i < host.workers; ++i, ++worker_rank) {
      std::vector<std::string> argv = {"worker", "--scheduler=" + scheduler,
                                       "--rank=" + std::to_string(worker_rank)};
      if (host.address != host.host) argv.push_back("--advertise=" + host.address);
      SpawnOverSsh(launch, host, "worker " + std::to_string(worker_rank), argv, group);
    }
  }
}

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
  for (int number = 1; std::getline(lines, line); ++number) {
    HostEntry entry;
    if (ParseHostLine(line, path + ":" + std::to_string(number) + ": ", &entry)) {
      entry.line = number;
      hosts.push_back(entry);
    }
  }
  CheckRoleCounts(hosts, path);
  return hosts;
}

std::string JobSecret(const std::vector<std::string>& role_flags) {
  for (const std::string& flag : role_flags) {
    if (flag.rfind("--secret_file", 0) == 0) return "";
  }
  LOG(INFO) << "a new cluster secret for this job: every connection is encrypted (CURVE); each "
               "host gets it over ssh";
  return FormatClusterSecret(GenerateClusterSecret());
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
  const double started = MonotonicSeconds();
  std::optional<LaunchOutput> output;  // outlives the group, which prints through it
  if (launch.show_progress) output.emplace(launch.output, StandardConsole());
  ProcessGroup group;
  if (output) output->Attach(&group);
  const int port = StartSshScheduler(launch, *scheduler_host, servers, workers, &group);
  if (port == 0) {
    if (output) output->Finish(130, MonotonicSeconds() - started);
    return 130;
  }
  const std::string scheduler = scheduler_host->address + ":" + std::to_string(port);
  LOG(INFO) << "scheduler on " << scheduler_host->host << " at " << scheduler;
  SpawnSshRoles(launch, scheduler, &group);
  const int code = group.Wait(launch.timeout_s);
  if (output) output->Finish(code, MonotonicSeconds() - started);
  return code;
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
  bool derived = false;
  if (port == 0) {
    // Derived from the job id, so two jobs on one node do not collide, and
    // below Linux's default ephemeral range (32768..60999), so that no
    // connection going out of the node can hold it.
    const std::string id = RequireEnv(env, "SLURM_JOB_ID");
    char* end = nullptr;
    const unsigned long long job = std::strtoull(id.c_str(), &end, 10);
    if (*end != '\0') throw MakeError("SLURM_JOB_ID '", id, "' is not a number");
    port = kSlurmFirstPort + static_cast<int>(job % kSlurmPorts);
    derived = true;
  }
  SlurmTask result;
  result.servers = servers;
  result.workers = tasks - 1 - servers;
  result.node_name = nodelist_hosts.front();
  result.port_derived = derived;
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

std::string SlurmJobSecretFile(const std::string& folder, const std::string& job_id) {
  MakeDirectories(folder);
  if (chmod(folder.c_str(), 0700) != 0) {
    throw MakeError("cannot make folder '", folder, "' private: ", strerror(errno));
  }
  const std::string path = folder + "/slurm-" + job_id + ".secret";
  if (access(path.c_str(), F_OK) != 0) {
    const std::string aside = path + "." + std::to_string(getpid()) + ".new";
    WriteClusterSecretFile(aside, GenerateClusterSecret());
    if (link(aside.c_str(), path.c_str()) != 0 && errno != EEXIST) {
      const int error = errno;
      unlink(aside.c_str());
      throw MakeError("cannot create secret file '", path, "': ", strerror(error));
    }
    unlink(aside.c_str());  // another task's may have won: every task reads `path`
  }
  ReadClusterSecretFile(path);  // its mode and form, checked here with a clear error
  return path;
}

namespace {

// Points KEEL_SECRET_FILE at the job's shared secret unless the user gave one.
void UseSlurmJobSecret(const std::map<std::string, std::string>& env,
                       const std::vector<std::string>& role_flags) {
  for (const std::string& flag : role_flags) {
    if (flag.rfind("--secret_file", 0) == 0) return;
  }
  if (const char* given = getenv("KEEL_SECRET_FILE"); given && *given) return;
  const char* folder = getenv("KEEL_SECRET_DIR");
  const char* home = getenv("HOME");
  const std::string base = folder && *folder ? folder : std::string(home ? home : "") + "/.keel";
  const std::string path = SlurmJobSecretFile(base, RequireEnv(env, "SLURM_JOB_ID"));
  setenv("KEEL_SECRET_FILE", path.c_str(), 1);
}

}  // namespace

int RunSlurmTask(const std::string& self, int servers, int port,
                 const std::vector<std::string>& role_flags) {
  std::map<std::string, std::string> env = SlurmEnvironment();
  UseSlurmJobSecret(env, role_flags);
  const std::vector<std::string> hosts = NodelistHosts(RequireEnv(env, "SLURM_JOB_NODELIST"));
  const SlurmTask task = ResolveSlurmTask(env, servers, port, hosts, NodeAddress(hosts.front()));
  const std::vector<std::string> argv = SlurmRoleCommand(self, task, role_flags);
  LOG(INFO) << "slurm task " << env["SLURM_PROCID"] << " of " << env["SLURM_NTASKS"] << " on node "
            << env["SLURM_NODEID"] << ": " << task.role
            << (task.role == "scheduler" ? "" : " " + std::to_string(task.rank)) << ", scheduler "
            << task.scheduler << " (" << task.node_name << ")"
            << (task.port_derived ? "; its port comes from SLURM_JOB_ID: if another program holds "
                                    "it, choose one with --scheduler_port"
                                  : "");
  std::vector<char*> args = ExecArguments(argv);
  fflush(stdout);
  fflush(stderr);
  execv(self.c_str(), args.data());
  throw MakeError("cannot run ", self, ": ", strerror(errno));
}

}  // namespace keel
