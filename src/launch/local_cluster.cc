#include "launch/local_cluster.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <optional>

#include "base/error.h"
#include "base/time.h"
#include "launch/ports.h"

namespace keel {
namespace {

// Starts a scheduler for `cluster` on loopback; returns its "host:port".
std::string StartLocalScheduler(const LocalCluster& cluster, const std::string& self,
                                const LaunchMetricsPorts& metrics, ProcessGroup* group) {
  char folder[] = "/tmp/keel-launch-XXXXXX";
  if (!mkdtemp(folder)) throw MakeError("cannot create a folder under /tmp");
  const std::string port_file = std::string(folder) + "/scheduler.port";
  std::vector<std::string> argv = {self,
                                   "scheduler",
                                   "--bind=127.0.0.1",
                                   "--port_file=" + port_file,
                                   "--num_servers=" + std::to_string(cluster.servers),
                                   "--num_workers=" + std::to_string(cluster.workers)};
  if (cluster.show_progress) argv.push_back("--progress_records");
  // The job's flags too: logging flags apply, the rest are ignored.
  argv.insert(argv.end(), cluster.role_flags.begin(), cluster.role_flags.end());
  metrics.AddFlag("scheduler", &argv);
  group->Spawn("scheduler", argv);
  std::string port;
  const bool started = group->Pump(15, [&] {
    std::ifstream in(port_file);
    return static_cast<bool>(in >> port);
  });
  unlink(port_file.c_str());
  rmdir(folder);
  if (!started) {
    group->StopAll();
    throw MakeError("the scheduler did not start (see its log above)");
  }
  // A restart (a fault) binds the same port: the nodes know that address.
  for (std::string& arg : argv) {
    if (arg.rfind("--port_file=", 0) == 0) arg = "--port=" + port;
  }
  // It takes over the running job: the checkpoints it finds are the job's.
  argv.push_back("--takes_over_job");
  group->SetRespawnArguments("scheduler", argv);
  return "127.0.0.1:" + port;
}

// Starts `count` processes of `role` ("server" or "worker"), ranks 0 on.
void SpawnRoles(const std::string& role, int count, const std::string& self,
                const std::vector<std::string>& common, const LocalClusterHooks* hooks,
                const LaunchMetricsPorts& metrics, ProcessGroup* group) {
  for (int i = 0; i < count; ++i) {
    const std::string name = role + " " + std::to_string(i);
    std::vector<std::string> argv = {self, role, "--rank=" + std::to_string(i)};
    argv.insert(argv.end(), common.begin(), common.end());
    if (hooks) {
      for (auto& flag : hooks->RoleFlags(role, i)) argv.push_back(flag);
    }
    metrics.AddFlag(name, &argv);
    group->Spawn(name, argv);
  }
}

}  // namespace

std::string SelfPath() {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) throw MakeError("cannot find the keel executable (/proc/self/exe)");
  return std::string(buffer, static_cast<size_t>(n));
}

void CheckLocalClusterSize(const LocalCluster& cluster) {
  if (cluster.servers < 1 || cluster.workers < 1) {
    throw MakeError("a cluster needs at least one server and one worker (--servers ",
                    cluster.servers, ", --workers ", cluster.workers, ")");
  }
  if (cluster.servers + cluster.workers > kMaxLocalProcesses) {
    throw MakeError("--servers ", cluster.servers, " and --workers ", cluster.workers,
                    ": a local cluster has at most ", kMaxLocalProcesses,
                    " servers and workers on this machine");
  }
}

int RunLocalCluster(const LocalCluster& cluster, LocalClusterHooks* hooks) {
  CheckLocalClusterSize(cluster);
  const std::string self = SelfPath();
  const double started = MonotonicSeconds();
  std::optional<LaunchOutput> output;  // outlives the group, which prints through it
  if (cluster.show_progress) output.emplace(cluster.output, StandardConsole());
  ProcessGroup group;
  group.DeferNotices();  // every child is a keel role
  if (hooks) {
    if (const std::string folder = hooks->CgroupFolder(); !folder.empty()) {
      group.SetCgroupFolder(folder);
    }
  }
  TimelineWriter timeline(cluster.model_dir, "launch", cluster.fresh_timeline);
  if (output) output->Attach(&group);
  if (hooks) hooks->Attach(&group, &timeline);
  struct DetachAtExit {  // before the timeline and the group go, however this returns
    LocalClusterHooks* hooks;
    ~DetachAtExit() {
      if (hooks) hooks->Detach();
    }
  } detach{hooks};
  const LaunchMetricsPorts metrics(cluster.metrics, cluster.scheduler.empty(), cluster.servers,
                                   cluster.workers, cluster.metrics_bind);
  const std::string scheduler = cluster.scheduler.empty()
                                    ? StartLocalScheduler(cluster, self, metrics, &group)
                                    : cluster.scheduler;
  std::vector<std::string> common = {"--scheduler=" + scheduler, "--bind=127.0.0.1"};
  common.insert(common.end(), cluster.role_flags.begin(), cluster.role_flags.end());
  metrics.Print(std::cout);
  if (hooks) hooks->ClusterKnown(self, common, scheduler);
  // A SIGTERM to the launcher is a preemption notice: the scheduler handles it.
  if (cluster.scheduler.empty()) group.SetPreemptionTarget("scheduler", cluster.preemption_grace_s);
  SpawnRoles("server", cluster.servers, self, common, hooks, metrics, &group);
  SpawnRoles("worker", cluster.workers, self, common, hooks, metrics, &group);
  const int code = group.Wait(cluster.timeout_s);
  if (hooks) hooks->Finish(code);
  timeline.Flush();
  if (cluster.report) cluster.report(cluster.model_dir);
  if (output) output->Finish(code, MonotonicSeconds() - started);
  return code;
}

}  // namespace keel
