#include "launch/start_over.h"

#include <glog/logging.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "base/time.h"
#include "launch/launcher.h"
#include "launch/local_cluster.h"

namespace keel {

void RejoinAsNewProcess(const std::vector<std::string>& argv) {
  const char* previous = getenv("KEEL_REJOINS");
  const int rejoins = previous ? std::atoi(previous) + 1 : 1;
  setenv("KEEL_REJOINS", std::to_string(rejoins).c_str(), 1);
  std::vector<char*> args = ExecArguments(argv);
  const std::string self = SelfPath();
  execv(self.c_str(), args.data());
  throw MakeError("cannot start ", self, " again: ", strerror(errno));
}

std::vector<std::string> AsReplacement(const std::vector<std::string>& argv, int rank) {
  std::vector<std::string> again;
  for (const std::string& arg : argv) {
    if (arg != "--join" && arg != "-join" && arg.rfind("--join=", 0) != 0) again.push_back(arg);
  }
  again.push_back("--rank=" + std::to_string(rank));
  return again;
}

bool ShouldStartOver(const Node& node) {
  const char* rejoins = getenv("KEEL_REJOINS");
  return node.removed() && (!rejoins || std::atoi(rejoins) < 3);
}

void StartOverIfRemoved(Node* node, const std::vector<std::string>& argv,
                        double heartbeat_interval_s) {
  // Its word comes in answer to a heartbeat to the scheduler itself (not one
  // a server passes on).
  node->HeartbeatToTheSchedulerOnly();
  const double deadline = MonotonicSeconds() + 3 * heartbeat_interval_s + 1;
  while (!node->removed() && MonotonicSeconds() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (ShouldStartOver(*node)) {
    LOG(WARNING) << "worker " << node->rank() << " left the cluster; it joins again";
    node->Stop();
    RejoinAsNewProcess(argv);
  }
}

}  // namespace keel
