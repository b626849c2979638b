// MetricsEndpoint: a role's HTTP port (--metrics_port): /metrics in
// Prometheus's text format, and the probes /healthz (liveness) and /readyz
// (readiness) that a supervisor such as Kubernetes polls.
//
// /healthz answers 200 "ok" while the process is up and `live` finds its
// loop alive, else 503 with the reason; /readyz answers 200 "ready" once
// `ready` says the role is part of the cluster (registered, in the view,
// serving its part), else 503 with the reason.
#ifndef KEEL_METRICS_METRICS_ENDPOINT_H_
#define KEEL_METRICS_METRICS_ENDPOINT_H_

#include <functional>
#include <string>

#include "io/http_server.h"
#include "metrics/metrics_registry.h"

namespace keel {

// A probe: "" if it passes, else why not. Called on the HTTP threads.
using Probe = std::function<std::string()>;

class MetricsEndpoint {
 public:
  // Routes /metrics, /healthz and /readyz on an HTTP server with `http`'s
  // options; `registry` must outlive the endpoint's serving (until Stop).
  MetricsEndpoint(const HttpServerOptions& http, const MetricsRegistry* registry, Probe live,
                  Probe ready);

  // Starts serving; throws Error naming the address if it cannot be bound.
  void Start() { server_.Start(); }
  // Stops serving (idempotent); the destructor does too.
  void Stop() { server_.Stop(); }

  int port() const { return server_.port(); }
  std::string address() const { return server_.address(); }
  // For more routes (before Start).
  HttpServer& http() { return server_; }

 private:
  HttpServer server_;
};

}  // namespace keel

#endif  // KEEL_METRICS_METRICS_ENDPOINT_H_
