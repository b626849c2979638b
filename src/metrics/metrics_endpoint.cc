// MetricsEndpoint's routes.
#include "metrics/metrics_endpoint.h"

#include <utility>

namespace keel {
namespace {

HttpResponse ProbeAnswer(const Probe& probe, const char* pass) {
  const std::string failure = probe ? probe() : "";
  return failure.empty() ? TextResponse(200, pass) : TextResponse(503, failure);
}

}  // namespace

MetricsEndpoint::MetricsEndpoint(const HttpServerOptions& http, const MetricsRegistry* registry,
                                 Probe live, Probe ready)
    : server_(http) {
  server_.Route("GET", "/metrics", [registry](const HttpRequest&) {
    HttpResponse response;
    response.body = registry->TextExposition();
    response.content_type = MetricsRegistry::kContentType;
    return response;
  });
  server_.Route("GET", "/healthz",
                [live = std::move(live)](const HttpRequest&) { return ProbeAnswer(live, "ok"); });
  server_.Route("GET", "/readyz", [ready = std::move(ready)](const HttpRequest&) {
    return ProbeAnswer(ready, "ready");
  });
}

}  // namespace keel
