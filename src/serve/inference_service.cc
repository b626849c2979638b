// InferenceService (serve/inference_service.h).
#include "serve/inference_service.h"

#include <glog/logging.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <new>
#include <utility>

#include "base/error.h"
#include "base/time.h"
#include "io/inference_format.h"

namespace keel {
namespace {

// Request latencies, 50 us .. 2.5 s: a single record is scored in tens of
// microseconds.
const std::vector<double>& ServingBucketsSeconds() {
  static const std::vector<double> kBuckets = {0.00005, 0.0001, 0.00025, 0.0005, 0.001,
                                               0.0025,  0.005,  0.01,    0.025,  0.05,
                                               0.1,     0.25,   0.5,     1,      2.5};
  return kBuckets;
}

// Bounds on what one request may make the server hold: 2^20 scores (their
// JSON text is ~40 MB), 2^24 gathered weights (64 MiB).
constexpr uint64_t kMaxScoresPerRequest = uint64_t{1} << 20;
constexpr uint64_t kMaxGatheredPerRequest = uint64_t{1} << 24;

// The first value of header `name` (case-insensitive, as HTTP names are), or "".
std::string Header(const HttpRequest& request, const std::string& name) {
  for (const auto& [key, value] : request.headers) {
    if (key.size() == name.size() &&
        std::equal(key.begin(), key.end(), name.begin(),
                   [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
      return value;
    }
  }
  return "";
}

// The error kind of a refused request's status, for the metrics.
const char* KindOfStatus(int status) {
  switch (status) {
    case 400:
      return "bad_record";
    case 406:
      return "not_acceptable";
    case 413:
      return "too_large";
    case 415:
      return "unsupported_type";
    default:
      return "malformed";
  }
}

}  // namespace

InferenceService::InferenceService(InferenceServiceOptions options)
    : options_(std::move(options)), http_([this] {
        HttpServerOptions http = options_.http;
        http.on_refused = [this](int status) {
          requests_->Add({{"code", std::to_string(status)}}).Increment();
          errors_->Add({{"kind", KindOfStatus(status)}}).Increment();
        };
        return http;
      }()) {
  AddMetrics();
  http_.Route("GET", "/ping", [this](const HttpRequest& request) { return Ping(request); });
  http_.Route("POST", "/invocations",
              [this](const HttpRequest& request) { return Invoke(request); });
  http_.Route("GET", "/metrics", [this](const HttpRequest&) {
    HttpResponse response;
    response.body = metrics_.TextExposition();
    response.content_type = MetricsRegistry::kContentType;
    return response;
  });
}

InferenceService::~InferenceService() { Stop(0); }

void InferenceService::AddMetrics() {
  requests_ = &metrics_.AddObservedCounter(
      "keel_serve_requests_total", "Requests to /invocations answered, by HTTP status code.");
  errors_ = &metrics_.AddObservedCounter(
      "keel_serve_errors_total",
      "Refused or failed /invocations requests by kind: bad_record, unsupported_type, "
      "not_acceptable, too_large, malformed, no_model, internal.");
  latency_ = &metrics_
                  .AddHistogram("keel_serve_request_duration_seconds",
                                "Time from a request's arrival (its body read) to its answer.")
                  .Add({}, ServingBucketsSeconds());
  metrics_.AddCounter("keel_serve_records_total", "Records scored.", MetricsRegistry::One([this] {
                        return static_cast<double>(records_.load());
                      }));
  metrics_.AddCounter("keel_serve_model_loads_total",
                      "Models loaded (at start and on SIGHUP), by result.", [this] {
                        return std::vector<MetricSample>{
                            {{{"result", "ok"}}, static_cast<double>(loads_.load())},
                            {{{"result", "failed"}}, static_cast<double>(failed_loads_.load())}};
                      });
  metrics_.AddGauge("keel_serve_model_loaded", "1 once a model serves, else 0.",
                    MetricsRegistry::One([this] { return loaded() ? 1.0 : 0.0; }));
}

void InferenceService::Start() { http_.Start(); }

void InferenceService::Stop(double max_seconds) {
  stopping_ = true;
  http_.Drain(max_seconds);
}

void InferenceService::Reload() {
  try {
    ModelArtifact artifact = ModelArtifact::Read(options_.model_dir);
    const Hyperparameters hyperparameters = artifact.hyperparameters;
    auto scorer =
        std::make_shared<const Scorer>(std::move(artifact), hyperparameters, options_.device, 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      model_ = std::move(scorer);
    }
    ++loads_;
  } catch (...) {
    ++failed_loads_;
    throw;
  }
}

bool InferenceService::loaded() const { return model() != nullptr; }

std::shared_ptr<const Scorer> InferenceService::model() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return model_;
}

HttpResponse InferenceService::Ping(const HttpRequest&) const {
  if (stopping_.load()) return TextResponse(503, "stopping");
  if (!loaded()) return TextResponse(503, "loading the model from " + options_.model_dir);
  return TextResponse(200, "");
}

HttpResponse InferenceService::Refuse(int status, const std::string& kind,
                                      const std::string& message) {
  errors_->Add({{"kind", kind}}).Increment();
  return TextResponse(status, message);
}

HttpResponse InferenceService::Invoke(const HttpRequest& request) {
  const double start = MonotonicSeconds();
  HttpResponse response;
  const std::shared_ptr<const Scorer> scorer = model();
  if (scorer == nullptr) {
    response = Refuse(503, "no_model", "no model loaded yet (GET /ping says when one is)");
  } else {
    try {
      const InferenceFormat in = ParseContentType(Header(request, "Content-Type"));
      const InferenceFormat out = ParseAccept(Header(request, "Accept"), InferenceFormat::kJson);
      PreparedBatch prepared;  // decoded in place: the batch is not copied to be scored
      Batch& batch = prepared.batch;
      DecodeRecords(in, request.body, scorer->input(), &batch);
      // What one request may make the server hold: its scores, and its rows'
      // gathered weights (a body of empty records is millions of them).
      const uint64_t scores = uint64_t{batch.rows()} * scorer->prediction_width();
      const uint64_t gathered = uint64_t{batch.nnz()} * scorer->hyperparameters().weight_width();
      if (scores > kMaxScoresPerRequest || gathered > kMaxGatheredPerRequest) {
        throw InferenceRequestError(
            413, std::to_string(batch.rows()) + " records of " + std::to_string(batch.nnz()) +
                     " features make " + std::to_string(scores) + " scores and " +
                     std::to_string(gathered) + " weights, more than one request may (" +
                     std::to_string(kMaxScoresPerRequest) + " and " +
                     std::to_string(kMaxGatheredPerRequest) + "): send fewer records a request");
      }
      Predictions predictions;
      if (batch.rows() > 0) {
        PrepareKeys(&prepared);
        scorer->Score(prepared, &predictions);
      }
      predictions.width = scorer->prediction_width();
      response.content_type = ContentTypeOf(out);
      EncodePredictions(out, predictions, &response.body);
      records_ += batch.rows();
    } catch (const InferenceRequestError& e) {
      response = Refuse(e.status(), KindOfStatus(e.status()), e.what());
    } catch (const std::bad_alloc&) {
      response = Refuse(503, "internal", "out of memory scoring this request");
    } catch (const std::exception& e) {
      LOG(WARNING) << "POST /invocations failed: " << e.what();
      response = Refuse(500, "internal", std::string("error: ") + e.what());
    }
  }
  requests_->Add({{"code", std::to_string(response.status)}}).Increment();
  latency_->Observe(MonotonicSeconds() - start);
  return response;
}

}  // namespace keel
