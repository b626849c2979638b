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
DECLARE_bool(metrics_port_fallback);
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

// --metrics_bind: the interface the roles serve metrics on.
std::string MetricsBindFromFlags();

}  // namespace keel

#endif  // KEEL_CLI_METRICS_FLAGS_H_
