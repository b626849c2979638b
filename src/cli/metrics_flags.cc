#include "cli/metrics_flags.h"

#include <arpa/inet.h>
#include <glog/logging.h>
#include <netinet/in.h>

#include <utility>

#include "base/error.h"
#include "flags/flag_rules.h"

DEFINE_int32(metrics_port, 0,
             "scheduler/server/worker: serve /metrics (Prometheus), /healthz and /readyz on this "
             "HTTP port (0: off)");
DEFINE_string(metrics_bind, "127.0.0.1",
              "scheduler/server/worker: the interface --metrics_port listens on (an IPv4 or IPv6 "
              "address; 0.0.0.0 for every interface)");
DEFINE_bool(metrics_port_fallback, false,
            "scheduler/server/worker: when --metrics_port is taken, serve on any free port "
            "instead and log it (keel launch sets it for the ports it picks: another process "
            "can take one between the pick and the role's start)");
DEFINE_string(metrics, "auto",
              "launch: auto gives every role on this machine a free --metrics_port and prints "
              "where to scrape it; off serves no metrics");

namespace keel {
namespace {

bool IsIpAddress(const std::string& text) {
  unsigned char address[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, text.c_str(), address) == 1 ||
         inet_pton(AF_INET6, text.c_str(), address) == 1;
}

}  // namespace

void CheckMetricsFlags() {
  RequireInRange("metrics_port", FLAGS_metrics_port, 0, 65535, "0 turns metrics off");
  if (!IsIpAddress(FLAGS_metrics_bind)) {
    throw MakeError("--metrics_bind '", FLAGS_metrics_bind,
                    "' is not an IPv4 or IPv6 address (127.0.0.1, 0.0.0.0, ::1)");
  }
}

std::optional<HttpServerOptions> MetricsHttpFromFlags() {
  CheckMetricsFlags();
  if (FLAGS_metrics_port == 0) return std::nullopt;
  HttpServerOptions options;
  options.host = FLAGS_metrics_bind;
  options.port = FLAGS_metrics_port;
  options.threads = 2;
  options.max_body_bytes = 64 << 10;  // the probes and /metrics take no body
  return options;
}

std::unique_ptr<MetricsEndpoint> StartMetricsEndpoint(
    const std::string& role, const MetricsRegistry* registry, Probe live, Probe ready,
    const std::function<void(HttpServer*)>& more_routes) {
  const std::optional<HttpServerOptions> http = MetricsHttpFromFlags();
  if (!http) return nullptr;
  const auto make = [&](int port) {
    HttpServerOptions options = *http;
    options.port = port;
    auto endpoint = std::make_unique<MetricsEndpoint>(options, registry, live, ready);
    if (more_routes) more_routes(&endpoint->http());
    return endpoint;
  };
  std::unique_ptr<MetricsEndpoint> endpoint = make(http->port);
  try {
    endpoint->Start();
  } catch (const Error& e) {
    if (!FLAGS_metrics_port_fallback) throw MakeError("--metrics_port: ", e.what());
    LOG(WARNING) << role << ": --metrics_port " << http->port << " was taken (" << e.what()
                 << "); serving metrics on another port";
    endpoint = make(0);
    try {
      endpoint->Start();
    } catch (const Error& again) {
      throw MakeError("--metrics_port: ", again.what());
    }
  }
  LOG(INFO) << role << ": metrics on http://" << endpoint->address() << "/metrics";
  return endpoint;
}

bool LaunchMetricsOn(const std::vector<std::string>& role_flags) {
  if (FLAGS_metrics != "auto" && FLAGS_metrics != "off") {
    throw MakeError("--metrics '", FLAGS_metrics, "' is not auto or off");
  }
  for (const std::string& flag : role_flags) {
    if (flag.rfind("--metrics_port", 0) == 0 || flag.rfind("-metrics_port", 0) == 0) {
      throw MakeError(
          "keel launch gives each role its own metrics port: use --metrics=auto "
          "(the default) or --metrics=off, not --metrics_port");
    }
  }
  return FLAGS_metrics == "auto";
}

std::string MetricsBindFromFlags() { return FLAGS_metrics_bind; }

}  // namespace keel
