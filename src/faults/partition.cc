#include "faults/partition.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "base/error.h"

namespace keel {
namespace {

// Where cgroup v2 is mounted ("" if nowhere): /sys/fs/cgroup, or
// /sys/fs/cgroup/unified beside cgroup v1.
std::string Cgroup2Mount() {
  std::ifstream mounts("/proc/mounts");
  std::string device, point, type, rest;
  while (mounts >> device >> point >> type && std::getline(mounts, rest)) {
    if (type == "cgroup2") return point;
  }
  return "";
}

bool ToolRuns(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

// Runs `iptables -w ARGS`; returns "" or what it said on failure.
std::string Iptables(const std::vector<std::string>& args) {
  std::string command = "iptables -w";
  for (const std::string& arg : args) command += " '" + arg + "'";
  command += " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return std::string("cannot run iptables: ") + strerror(errno);
  std::string output;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe)) output += buffer;
  const int status = pclose(pipe);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return output.empty() ? "iptables failed" : output;
}

// The socket inodes process `pid` holds open.
std::set<unsigned long> SocketInodes(pid_t pid) {
  std::set<unsigned long> inodes;
  const std::string folder = "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = opendir(folder.c_str());
  if (!dir) return inodes;
  while (dirent* entry = readdir(dir)) {
    char target[64];
    const std::string link = folder + "/" + entry->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    unsigned long inode = 0;
    if (sscanf(target, "socket:[%lu]", &inode) == 1) inodes.insert(inode);
  }
  closedir(dir);
  return inodes;
}

// Ports of the listening sockets (state 0A) in /proc/PID/net/FILE whose inode is in `inodes`.
void AddListeningPorts(pid_t pid, const char* file, const std::set<unsigned long>& inodes,
                       std::set<int>* ports) {
  std::ifstream table("/proc/" + std::to_string(pid) + "/net/" + file);
  std::string line;
  std::getline(table, line);  // the header
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    unsigned long inode = 0;
    if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode)) {
      continue;
    }
    const size_t colon = local.rfind(':');
    if (state != "0A" || colon == std::string::npos || !inodes.count(inode)) continue;
    ports->insert(static_cast<int>(std::stoul(local.substr(colon + 1), nullptr, 16)));
  }
}

}  // namespace

void CheckPartitionsPossible(uid_t uid, const std::string& item) {
  const std::string why = "--faults item '" + item + "': a partition ";
  if (uid != 0) {
    throw MakeError(why, "needs root: it puts each process in a cgroup of its own and drops the ",
                    "traffic between the groups with iptables (this launch runs as uid ", uid,
                    "); run keel launch as root, or leave partitions out");
  }
  if (Cgroup2Mount().empty()) {
    throw MakeError(why, "needs cgroup v2 (no cgroup2 file system in /proc/mounts): iptables ",
                    "tells the processes apart by their cgroup");
  }
  if (!ToolRuns("iptables -w -L OUTPUT -n")) {
    throw MakeError(why, "needs iptables, which did not run ('iptables -L OUTPUT' failed)");
  }
}

std::string CgroupName(const std::string& process) {
  std::string name = process;
  std::replace(name.begin(), name.end(), ' ', '-');
  return name;
}

std::vector<int> ListeningPorts(pid_t pid) {
  const std::set<unsigned long> inodes = SocketInodes(pid);
  std::set<int> ports;
  AddListeningPorts(pid, "tcp", inodes, &ports);
  AddListeningPorts(pid, "tcp6", inodes, &ports);
  return std::vector<int>(ports.begin(), ports.end());
}

Partitioner::Partitioner() : mount_(Cgroup2Mount()) {
  if (mount_.empty()) throw MakeError("a partition needs cgroup v2: none is mounted");
  relative_ = "keel-launch-" + std::to_string(getpid());
  folder_ = mount_ + "/" + relative_;
  if (mkdir(folder_.c_str(), 0755) != 0 && errno != EEXIST) {
    throw MakeError("cannot create the cgroup ", folder_, ": ", strerror(errno));
  }
}

Partitioner::~Partitioner() {
  for (size_t cut = 0; cut < cuts_.size(); ++cut) Heal(static_cast<int>(cut));
  // The children's cgroups (empty once the children are gone), then the launch's.
  if (DIR* dir = opendir(folder_.c_str())) {
    std::vector<std::string> children;
    while (dirent* entry = readdir(dir)) {
      if (entry->d_type == DT_DIR && entry->d_name[0] != '.') children.push_back(entry->d_name);
    }
    closedir(dir);
    for (const std::string& child : children) rmdir((folder_ + "/" + child).c_str());
  }
  rmdir(folder_.c_str());
}

std::string Partitioner::CgroupPath(const std::string& name) const {
  return relative_ + "/" + CgroupName(name);
}

void Partitioner::AddRules(const Process& from, const Process& to,
                           std::vector<std::vector<std::string>>* cut) {
  for (const int port : ListeningPorts(to.second)) {
    const std::vector<std::string> rule = {"OUTPUT",
                                           "-p",
                                           "tcp",
                                           "-m",
                                           "cgroup",
                                           "--path",
                                           CgroupPath(from.first),
                                           "--dport",
                                           std::to_string(port),
                                           "-j",
                                           "DROP"};
    std::vector<std::string> add = {"-I"};
    add.insert(add.end(), rule.begin(), rule.end());
    const std::string error = Iptables(add);
    if (!error.empty()) {
      throw MakeError("cannot cut ", from.first, " from ", to.first, " (port ", port,
                      "): iptables: ", error);
    }
    cut->push_back(rule);
  }
}

int Partitioner::Cut(const std::vector<Process>& a, const std::vector<Process>& b, int* rules) {
  cuts_.emplace_back();
  const int id = static_cast<int>(cuts_.size()) - 1;
  try {
    for (const Process& from : a) {
      for (const Process& to : b) {
        AddRules(from, to, &cuts_.back());
        AddRules(to, from, &cuts_.back());
      }
    }
  } catch (const Error&) {
    Heal(id);
    throw;
  }
  *rules = static_cast<int>(cuts_.back().size());
  return id;
}

void Partitioner::Heal(int cut) {
  if (cut < 0 || static_cast<size_t>(cut) >= cuts_.size()) return;
  for (const std::vector<std::string>& rule : cuts_[static_cast<size_t>(cut)]) {
    std::vector<std::string> remove = {"-D"};
    remove.insert(remove.end(), rule.begin(), rule.end());
    Iptables(remove);
  }
  cuts_[static_cast<size_t>(cut)].clear();
}

}  // namespace keel
