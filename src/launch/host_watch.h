// HostWatch: whether the other hosts of a `keel train` job are still there.
//
// SageMaker never starts a lost host again, so a job whose leader is gone
// (its scheduler with it), or whose host took the only copy of some key
// ranges (--replication 0), cannot go on; its other hosts must fail, with a
// reason, rather than wait. Every host's `keel train` listens on a port of
// its own (the watch port, accepting and closing connections) and connects
// to every other host's once a second. A host that answered once and then
// refuses or does not answer for `grace_s` is gone.
//
// Not thread-safe: the process group calls it from the thread that runs it.
#ifndef KEEL_LAUNCH_HOST_WATCH_H_
#define KEEL_LAUNCH_HOST_WATCH_H_

#include <string>
#include <vector>

#include "launch/launcher.h"

namespace keel {

struct WatchedHost {
  std::string name;     // as resourceconfig.json names it
  std::string address;  // what to connect to (its name, unless mapped)
  bool leader = false;
};

class HostWatch : public ProcessGroup::Observer {
 public:
  // Watches `hosts` (the others, not this one) on `port`. A lost leader
  // always ends the job; another lost host only if `lost_host_ends_job`.
  HostWatch(std::vector<WatchedHost> hosts, int port, bool lost_host_ends_job, double grace_s);
  ~HostWatch() override;
  HostWatch(const HostWatch&) = delete;
  HostWatch& operator=(const HostWatch&) = delete;

  // Listens on 0.0.0.0:port. Throws Error naming the port if it cannot.
  void Listen();
  // The group whose roles it stops when the job cannot go on (not owned).
  void Attach(ProcessGroup* group) { group_ = group; }
  // Why the job cannot go on ("the leader algo-1 is gone: ..."); "" while it can.
  const std::string& failure() const { return failure_; }

  void Started(const std::string& /*name*/, pid_t /*pid*/) override {}
  void Exited(const std::string& /*name*/, pid_t /*pid*/, int /*status*/,
              bool /*tolerated*/) override {}
  // Accepts and closes the connections waiting on the watch port, and once a
  // second probes every host; stops the group's roles when one is gone.
  void Round() override;
  bool JobOver() const override { return false; }

  // Whether a TCP connection to `address`:`port` opens within `timeout_s`.
  static bool Answers(const std::string& address, int port, double timeout_s);

 private:
  struct Host {
    WatchedHost host;
    double last_answer = 0;  // MonotonicSeconds() of its last answer; 0: none yet
  };

  std::vector<Host> hosts_;
  int port_;
  bool lost_host_ends_job_;
  double grace_s_;
  int listener_ = -1;
  double last_probe_ = 0;
  std::string failure_;
  ProcessGroup* group_ = nullptr;
};

}  // namespace keel

#endif  // KEEL_LAUNCH_HOST_WATCH_H_
