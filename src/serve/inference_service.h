// InferenceService: `keel serve`, SageMaker's inference contract over HTTP
// for a trained model (worker/model_artifact.h).
//
// Routes: GET /ping (200 once a model is loaded, 503 before), POST
// /invocations (records in any request format of io/inference_format.h,
// answered in the format the Accept header asks for, application/json by
// default), GET /metrics (Prometheus: requests by code, latency, records,
// errors by kind, model loads).
//
// A bad request is answered 4xx with a message naming the record and the
// problem (400), the content type (415), the Accept header (406) or the body's
// size (413); nothing a client sends stops the server or the other clients'
// requests. Reload swaps the model in atomically: requests in flight finish on
// the model they started with, later ones get the new one, and a model that
// fails to load leaves the old one serving.
//
// Thread-safe: Reload and Stop may be called from any thread while requests
// are served.
#ifndef KEEL_SERVE_INFERENCE_SERVICE_H_
#define KEEL_SERVE_INFERENCE_SERVICE_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "io/http_server.h"
#include "metrics/metrics_registry.h"
#include "worker/scorer.h"

namespace keel {

struct InferenceServiceOptions {
  // The model folder or storage URI (file://, s3://).
  std::string model_dir;
  // Where to listen, the serving threads and the body limit (max_body_bytes).
  HttpServerOptions http;
  // The compute backend each request scores on ("cpu" or "cuda:N").
  std::string device = "cpu";
};

class InferenceService {
 public:
  explicit InferenceService(InferenceServiceOptions options);
  // Stops serving.
  ~InferenceService();
  InferenceService(const InferenceService&) = delete;
  InferenceService& operator=(const InferenceService&) = delete;

  // Binds and starts serving (without a model: /ping answers 503 until
  // Reload succeeds). Throws Error naming the address if it cannot bind.
  void Start();
  // Loads the model folder (again) and swaps it in. Throws Error naming the
  // folder and the problem; the model that was serving (if any) goes on.
  void Reload();
  // Stops: new connections are refused, /ping answers 503 on those already
  // open (a load balancer takes this instance out), every answer closes its
  // connection, the requests in flight and those already accepted are
  // answered (HttpServer::Drain, for at most `max_seconds`), then the serving
  // threads are joined. Idempotent.
  void Stop(double max_seconds = 5);

  int port() const { return http_.port(); }
  std::string address() const { return http_.address(); }
  bool loaded() const;
  // Successful loads so far.
  uint64_t loads() const { return loads_.load(); }

 private:
  HttpResponse Ping(const HttpRequest& request) const;
  HttpResponse Invoke(const HttpRequest& request);
  // The answer to a refused request, counted under `kind`.
  HttpResponse Refuse(int status, const std::string& kind, const std::string& message);
  std::shared_ptr<const Scorer> model() const;
  void AddMetrics();

  const InferenceServiceOptions options_;
  MetricsRegistry metrics_;
  HttpServer http_;
  mutable std::mutex mutex_;  // guards model_
  std::shared_ptr<const Scorer> model_;
  std::atomic<uint64_t> loads_{0}, failed_loads_{0}, records_{0};
  std::atomic<bool> stopping_{false};
  prometheus::Family<prometheus::Counter>* requests_ = nullptr;  // by code
  prometheus::Family<prometheus::Counter>* errors_ = nullptr;    // by kind
  prometheus::Histogram* latency_ = nullptr;
};

}  // namespace keel

#endif  // KEEL_SERVE_INFERENCE_SERVICE_H_
