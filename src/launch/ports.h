// Free TCP ports on this machine for the roles a local launch starts, and
// the metrics ports of a local `keel launch`'s roles.
#ifndef KEEL_LAUNCH_PORTS_H_
#define KEEL_LAUNCH_PORTS_H_

#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace keel {

// `count` TCP ports on 127.0.0.1 free right now, all different (each was
// bound and released; the roles bind them a moment later), picked below the
// kernel's ephemeral range where it leaves room, so that no role's
// transport (which binds port 0 and connects out) takes one meanwhile.
// Throws Error if none can be bound.
std::vector<int> FreeLocalPorts(int count);

// The kernel's ephemeral port range (/proc/sys/net/ipv4/ip_local_port_range;
// Linux's default, 32768..60999, if it cannot be read).
std::pair<int, int> EphemeralPortRange();

// The metrics ports of a local `keel launch`'s roles, by the role's name
// ("scheduler", "server 0", "worker 1"): a free port each (FreeLocalPorts),
// or none if its metrics are off.
class LaunchMetricsPorts {
 public:
  // `with_scheduler`: the launch starts the scheduler (not an external one).
  // `bind`: the interface the roles serve metrics on (--metrics_bind).
  LaunchMetricsPorts(bool on, bool with_scheduler, int servers, int workers,
                     const std::string& bind);

  // Adds --metrics_port for the role `name` to its `argv`.
  void AddFlag(const std::string& name, std::vector<std::string>* argv) const;
  // Prints where to scrape each role and the scheduler's status page
  // (nothing if metrics are off).
  void Print(std::ostream& out) const;

 private:
  std::string bind_;
  std::vector<std::pair<std::string, int>> ports_;
};

}  // namespace keel

#endif  // KEEL_LAUNCH_PORTS_H_
