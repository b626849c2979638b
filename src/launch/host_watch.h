// HostWatch: whether the other hosts of a `keel train` job are still there.
//
// SageMaker never starts a lost host again, so a job whose leader is gone
// (its scheduler with it), or whose host took the only copy of some key
// ranges (--replication 0), cannot go on; its other hosts must fail, with a
// reason, rather than wait. Every host's `keel train` listens on a port of
// its own (the watch port, accepting and closing connections) and connects
// to every other host's once a second (five times a second while it has not
// answered yet). The connections are made without blocking: a probe that has
// not opened within half a second failed, and the rounds in between go on
// relaying the roles' output, so a host whose address drops connections
// silently never holds up the group's loop. A host that answered once and
// then refuses or does not answer for `grace_s` is gone; one that never answered is not (it may not
// have started yet). The host named as the cause is the one silent longest
// of those whose loss ends the job, a never-answering one silent since the
// watch began: a leader killed before this host first reached it is named,
// not a host that stopped because the leader was gone.
//
// Not thread-safe: the process group calls it from the thread that runs it.
#ifndef KEEL_LAUNCH_HOST_WATCH_H_
#define KEEL_LAUNCH_HOST_WATCH_H_

#include <sys/socket.h>

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
  // How many of the hosts have answered since the watch began.
  int reached() const;

  void Started(const std::string& /*name*/, pid_t /*pid*/) override {}
  void Exited(const std::string& /*name*/, pid_t /*pid*/, int /*status*/,
              bool /*tolerated*/) override {}
  // Accepts and closes the connections waiting on the watch port, takes the
  // results of the probes under way, starts those due (every host once a
  // second); stops the group's roles when one is gone. Never blocks, but for
  // resolving a host's name until it is first resolved.
  void Round() override;
  bool JobOver() const override { return false; }

  // Whether a TCP connection to `address`:`port` opens within `timeout_s`.
  static bool Answers(const std::string& address, int port, double timeout_s);

 private:
  struct Host {
    WatchedHost host;
    double last_answer = 0;  // MonotonicSeconds() of its last answer; 0: none yet
    bool answered_now = false;  // in the last probe that ended
    int probe = -1;             // the connection under way; -1: none
    double probe_started = 0;
    bool resolved = false;  // `address` holds the host's address (until a probe fails)
    sockaddr_storage address{};
    socklen_t address_length = 0;
  };

  // Starts a probe of every host (`all`) or of those that never answered,
  // but for those with a probe under way.
  void StartProbes(bool all);
  // Ends the probes that opened, failed or ran out of time.
  void TakeProbes();
  // Records a probe of `host` that ended at `now`, `answered` or not.
  void Ended(Host* host, bool answered, double now);
  // Whether losing `host` ends the job.
  bool Ends(const Host& host) const { return host.host.leader || lost_host_ends_job_; }
  // The reason naming `host`, as of `now` (MonotonicSeconds()).
  std::string Failure(const Host& host, double now) const;

  std::vector<Host> hosts_;
  int port_;
  bool lost_host_ends_job_;
  double grace_s_;
  int listener_ = -1;
  double started_;         // MonotonicSeconds() when it was made
  double last_probe_ = 0;  // of every host
  double last_unseen_probe_ = 0;
  std::string failure_;
  ProcessGroup* group_ = nullptr;
};

}  // namespace keel

#endif  // KEEL_LAUNCH_HOST_WATCH_H_
