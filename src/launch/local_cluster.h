// A job's roles as processes on this machine: a scheduler (or an external
// one), servers and workers on loopback, their output relayed and their
// metrics ports picked, until the job ends. What acts on the processes while
// they run (fault injection) comes in as hooks.
#ifndef KEEL_LAUNCH_LOCAL_CLUSTER_H_
#define KEEL_LAUNCH_LOCAL_CLUSTER_H_

#include <functional>
#include <string>
#include <vector>

#include "io/timeline_writer.h"
#include "launch/launcher.h"
#include "launch/role_output.h"

namespace keel {

// The most servers and workers a cluster on this machine has in all.
constexpr int kMaxLocalProcesses = 256;

// The keel executable's absolute path, to start roles with. Throws Error if
// it cannot be found.
std::string SelfPath();

// A local cluster: a scheduler (unless `scheduler` names an external one),
// servers and workers as child processes on loopback.
struct LocalCluster {
  int servers = 1;
  int workers = 1;
  std::string scheduler;                // "host:port" of an external scheduler, or empty
  std::vector<std::string> role_flags;  // forwarded to every role
  double timeout_s = 0;                 // 0: none
  // The job's model folder (--model_dir, or the default `keel launch` chose
  // when the job named none, in role_flags as --model_dir): the launcher's
  // part of the timeline goes there (timeline/launch.jsonl), and the closing
  // summary names it; "" for none.
  std::string model_dir;
  bool fresh_timeline = true;  // false when the job resumes: the timeline goes on
  // Writes the job's report at the end, given the model folder (`keel
  // launch --report`); empty for none.
  std::function<void(const std::string& model_dir)> report;
  // Progress, quiet logs and the closing summary as --progress, --verbose
  // and --log_dir say (launch/role_output.h); false: every role's line as it
  // comes.
  bool show_progress = false;
  // How the terminal shows them, when show_progress.
  LaunchOutputOptions output;
  // Each role started gets a free --metrics_port, and where to scrape them
  // (on `metrics_bind`, the roles' --metrics_bind) is printed.
  bool metrics = false;
  std::string metrics_bind = "127.0.0.1";
  // How long a SIGTERM to the launcher (a preemption notice, passed to the
  // scheduler) waits for the preemption checkpoint (--preemption_grace).
  double preemption_grace_s = 90;
};

// What acts on a local cluster's processes while it runs: fault injection
// and the record of process events (faults/launch_faults.h). Every call
// comes from the thread that runs the cluster.
class LocalClusterHooks {
 public:
  virtual ~LocalClusterHooks() = default;
  // The cgroup folder every process is started in ("" for none); asked once,
  // before anything starts.
  virtual std::string CgroupFolder() const { return ""; }
  // The group and the launcher's timeline (both outlive the hooks' use of
  // them), before anything starts.
  virtual void Attach(ProcessGroup* /*group*/, TimelineWriter* /*timeline*/) {}
  // Flags for process `role` (server or worker) of rank `rank`, after the
  // cluster's.
  virtual std::vector<std::string> RoleFlags(const std::string& /*role*/, int /*rank*/) const {
    return {};
  }
  // The scheduler's address and the arguments every server and worker starts
  // with (after `self ROLE`), once the scheduler runs.
  virtual void ClusterKnown(const std::string& /*self*/,
                            const std::vector<std::string>& /*common*/,
                            const std::string& /*scheduler*/) {}
  // The group's exit code, once every process is gone.
  virtual void Finish(int /*code*/) {}
  // Lets go of the group and the timeline: called before either goes,
  // whether the cluster ran to its end or failed to start.
  virtual void Detach() {}
};

// Checks the size of a cluster on this machine: at least one server and one
// worker, at most kMaxLocalProcesses in all. Throws Error naming the flags.
void CheckLocalClusterSize(const LocalCluster& cluster);

// Starts the cluster, forwards its logs and waits; returns 0 when every role
// succeeded. See ProcessGroup::Wait for the other codes. `hooks` may be null.
int RunLocalCluster(const LocalCluster& cluster, LocalClusterHooks* hooks = nullptr);

}  // namespace keel

#endif  // KEEL_LAUNCH_LOCAL_CLUSTER_H_
