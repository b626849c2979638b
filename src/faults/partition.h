// Partitioner: cuts the network between two groups of a local launch's
// processes and heals it, for the fault schedule's partition items
// (faults/fault_schedule.h).
//
// How: every process of the launch runs in a cgroup of its own (cgroup v2,
// <cgroup2 mount>/keel-launch-<launcher pid>/<process name>), joined before it
// runs (ProcessGroup::SetCgroupFolder), because a socket belongs to the
// cgroup its process was in when it made it. A cut adds, for every process a
// on one side and b on the other, iptables rules to the OUTPUT chain that drop
// the TCP packets a's sockets send to b's listening ports and b's to a's.
// Every node sends on its own connection to the receiver's listening socket
// (kv/van.h), so that cuts every message both ways; loopback traffic goes
// through OUTPUT, so this works for a cluster on 127.0.0.1. A heal deletes
// the cut's rules. A process started again during a cut is not in it (its new
// ports are not in the rules).
//
// Needs root (iptables, cgroups): CheckPartitionsPossible says why not.
// Not thread-safe: it runs on the launcher's thread.
#ifndef KEEL_FAULTS_PARTITION_H_
#define KEEL_FAULTS_PARTITION_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace keel {

// Throws Error saying why a launch by user `uid` cannot partition its
// processes (not root; no cgroup2 mount; no iptables), naming `item`.
void CheckPartitionsPossible(uid_t uid, const std::string& item);

class Partitioner {
 public:
  using Process = std::pair<std::string, pid_t>;  // name, pid

  // Creates the launch's cgroup folder. Throws Error if it cannot.
  Partitioner();
  // Heals every cut still in force and removes the cgroups.
  ~Partitioner();
  Partitioner(const Partitioner&) = delete;
  Partitioner& operator=(const Partitioner&) = delete;

  // The folder under which ProcessGroup makes each child's cgroup.
  const std::string& folder() const { return folder_; }

  // Cuts `a` from `b`; returns the cut's id for Heal, and in `rules` the
  // number of iptables rules it added. Throws Error if iptables refuses a
  // rule (the rules added so far are removed).
  int Cut(const std::vector<Process>& a, const std::vector<Process>& b, int* rules);
  // Removes the cut's rules (once; a second call does nothing).
  void Heal(int cut);

 private:
  // "keel-launch-123/server-0": the cgroup path iptables matches.
  std::string CgroupPath(const std::string& name) const;
  void AddRules(const Process& from, const Process& to, std::vector<std::vector<std::string>>* cut);

  std::string mount_;   // the cgroup2 mount point
  std::string folder_;  // mount_ + "/" + relative_
  std::string relative_;
  std::vector<std::vector<std::vector<std::string>>> cuts_;  // per cut: each rule's arguments
};

// The TCP ports process `pid` listens on (from /proc), sorted.
std::vector<int> ListeningPorts(pid_t pid);

// "server 0" -> "server-0": a process's cgroup folder name.
std::string CgroupName(const std::string& process);

}  // namespace keel

#endif  // KEEL_FAULTS_PARTITION_H_
