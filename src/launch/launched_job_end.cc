#include "launch/launched_job_end.h"

#include <sys/wait.h>

#include <cstdlib>

namespace keel {
namespace {

bool ExitedCleanly(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// The rank in "worker 3" for `role` "worker", or -1 if `name` is not one.
int RankOf(const std::string& name, const std::string& role) {
  const std::string prefix = role + " ";
  if (name.compare(0, prefix.size(), prefix) != 0 || name.size() == prefix.size()) return -1;
  char* end = nullptr;
  const long rank = std::strtol(name.c_str() + prefix.size(), &end, 10);
  return *end == '\0' && rank >= 0 ? static_cast<int>(rank) : -1;
}

}  // namespace

void LaunchedJobEnd::Started(const std::string& name) {
  const int worker = RankOf(name, "worker");
  if (worker >= 0) finished_workers_.erase(worker);
}

void LaunchedJobEnd::Exited(const std::string& name, int status, bool tolerated) {
  if (over()) return;
  if (name == "scheduler") {
    if (tolerated && WIFSIGNALED(status)) return;  // killed by a fault
    reason_ = "the scheduler exited";
  } else if (const int server = RankOf(name, "server");
             server >= 0 && ExitedCleanly(status) && !drained_.count(name)) {
    reason_ = name + " was shut down";
  } else if (const int worker = RankOf(name, "worker"); worker >= 0) {
    if (ExitedCleanly(status)) {
      finished_workers_.insert(worker);
    } else {
      finished_workers_.erase(worker);
    }
    if (static_cast<int>(finished_workers_.size()) >= workers_) reason_ = "every worker finished";
  }
}

}  // namespace keel
