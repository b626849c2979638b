// The command line's metrics flags (metrics_flags.cc): every role's HTTP port
// for /metrics, /healthz and /readyz (--metrics_port, --metrics_bind), and
// `keel launch --metrics`. Every user of these flags includes this header;
// the flags are defined nowhere else.
#ifndef KEEL_CLI_METRICS_FLAGS_H_
#define KEEL_CLI_METRICS_FLAGS_H_

#include <gflags/gflags.h>

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "io/http_server.h"
#include "metrics/metrics_endpoint.h"

DECLARE_int32(metrics_port);
DECLARE_string(metrics_bind);
DECLARE_string(metrics);

namespace keel {

// Checks --metrics_port (0 .. 65535) and --metrics_bind (an IPv4 or IPv6
// address); throws Error naming the flag, its value and the rule.
void CheckMetricsFlags();

// The HTTP server a role's metrics endpoint listens with; none when
// --metrics_port is 0 (off). Throws Error as CheckMetricsFlags does.
std::optional<HttpServerOptions> MetricsHttpFromFlags();

// Starts the endpoint of `role` ("scheduler", "server 2", ...) if the flags
// turn it on (null otherwise), with the routes `more_routes` adds (if any),
// and logs where it listens. Throws Error naming the address if it cannot be
// bound.
std::unique_ptr<MetricsEndpoint> StartMetricsEndpoint(
    const std::string& role, const MetricsRegistry* registry, Probe live, Probe ready,
    const std::function<void(HttpServer*)>& more_routes = nullptr);

// `keel launch --metrics`: "auto" (each role on this machine gets a free
// port) or "off". Throws Error for anything else, or if --metrics_port is
// among the role flags of a local launch (the launcher gives each role its own).
bool LaunchMetricsOn(const std::vector<std::string>& role_flags);

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
  LaunchMetricsPorts(bool on, bool with_scheduler, int servers, int workers);

  // Adds --metrics_port for the role `name` to its `argv`.
  void AddFlag(const std::string& name, std::vector<std::string>* argv) const;
  // Prints where to scrape each role and the scheduler's status page
  // (nothing if metrics are off).
  void Print(std::ostream& out) const;

 private:
  std::vector<std::pair<std::string, int>> ports_;
};

}  // namespace keel

#endif  // KEEL_CLI_METRICS_FLAGS_H_
