// `keel serve` as its clients see it: the real binary on loopback, spoken to
// with curl (a client from outside the project) and with the tests' own HTTP
// client (scrape.h). A served prediction is what `keel predict` writes for the
// same record (byte for byte in the text types, tensor for tensor in
// recordIO), in every request format and every response type, and what the
// weights give by hand; a bad request gets a 4xx naming the record and the
// problem and leaves the server serving; SIGHUP swaps a new model in, or keeps
// the old one when the new one does not load; SIGTERM lets the request in
// flight finish.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/json_reader.h"
#include "base/time.h"
#include "io/recordio.h"
#include "record.pb.h"
#include "scrape.h"
#include "test_util.h"
#include "worker/model_artifact.h"

namespace keel {
namespace {

using testing::Contains;
using testing::HttpAnswer;
using testing::KeelBinary;
using testing::WaitFor;

// ---------------------------------------------------------------------------
// Models: small linear ones whose scores a reader can work out by hand.

// Features 0..3 of a CSV model: its input width is 4.
ModelArtifact CsvModel(PredictorType type) {
  ModelArtifact model;
  model.hyperparameters.predictor_type = type;
  model.data_format = DataFormat::kCsv;
  model.features = {0, 1, 2, 3};
  return model;
}

// sigmoid(0.5 x0 - x1 + 0.25 x2 + 2 x3 - 0.125), labelled 1 from 0.7 on (not
// the default 0.5: a tuned threshold).
ModelArtifact BinaryModel() {
  ModelArtifact model = CsvModel(PredictorType::kBinaryClassifier);
  model.hyperparameters.threshold = 0.7;
  model.weights = {0.5f, -1.0f, 0.25f, 2.0f};
  model.bias = {-0.125f};
  return model;
}

// BinaryModel with other weights.
ModelArtifact OtherBinaryModel() {
  ModelArtifact model = BinaryModel();
  model.weights = {-0.5f, 1.0f, 0.75f, -1.0f};
  model.bias = {0.25f};
  return model;
}

// Three classes: softmax over class c of sum_i x_i w[i][c] + b[c].
ModelArtifact MulticlassModel() {
  ModelArtifact model = CsvModel(PredictorType::kMulticlassClassifier);
  model.hyperparameters.num_classes = 3;
  model.weights = {1.0f,   0.0f,  -1.0f,  // feature 0
                   0.0f,   0.5f,  0.0f,   // feature 1
                   -0.25f, 0.25f, 0.5f,   // feature 2
                   0.125f, -0.5f, 1.0f};  // feature 3
  model.bias = {0.0f, 0.25f, -0.25f};
  return model;
}

// 2 x0 - 0.5 x1 + 1.5 x2 + 0.25 x3 + 3.
ModelArtifact RegressorModel() {
  ModelArtifact model = CsvModel(PredictorType::kRegressor);
  model.weights = {2.0f, -0.5f, 1.5f, 0.25f};
  model.bias = {3.0f};
  return model;
}

// A sparse binary classifier trained on 1-based libsvm data with no
// feature_dim: features 0, 4 and 999 (0-based), any index accepted.
ModelArtifact SparseModel() {
  ModelArtifact model;
  model.hyperparameters.predictor_type = PredictorType::kBinaryClassifier;
  model.data_format = DataFormat::kLibsvm;
  model.features = {0, 4, 999};
  model.weights = {1.5f, -0.75f, 0.25f};
  model.bias = {0.0625f};
  return model;
}

// A factorization machine with 2 factors on the 4 CSV features: rows are
// (w, v1, v2); 0.5 sum_f ((sum_i v_if x_i)^2 - sum_i v_if^2 x_i^2) + w.x + b.
ModelArtifact FactorizationMachineModel(PredictorType type) {
  ModelArtifact model = CsvModel(type);
  model.hyperparameters.job = JobKind::kFactorizationMachines;
  model.hyperparameters.num_factors = 2;
  model.weights = {0.5f,  0.25f,  -0.5f,   // feature 0
                   -1.0f, 0.5f,   0.125f,  // feature 1
                   0.25f, -0.25f, 1.0f,    // feature 2
                   2.0f,  0.75f,  0.5f};   // feature 3
  model.bias = {-0.125f};
  return model;
}

// The factorization machine's score (before a link) for a dense record.
double FactorizationMachineSum(const ModelArtifact& model, const std::vector<float>& x) {
  double sum = model.bias[0];
  for (size_t i = 0; i < x.size(); ++i) sum += double{model.weights[3 * i]} * x[i];
  for (int f = 1; f <= 2; ++f) {
    double linear = 0, squares = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double vx = double{model.weights[3 * i + f]} * x[i];
      linear += vx;
      squares += vx * vx;
    }
    sum += 0.5 * (linear * linear - squares);
  }
  return sum;
}

// The weighted sum of `model` (a width-1 linear one) for a record given by
// its (0-based index, value) pairs; unseen features weigh zero.
double WeightedSum(const ModelArtifact& model, const std::vector<std::pair<uint64_t, float>>& x) {
  double sum = model.bias[0];
  for (const auto& [index, value] : x) {
    for (size_t i = 0; i < model.features.size(); ++i) {
      if (model.features[i] == index) sum += double{model.weights[i]} * value;
    }
  }
  return sum;
}

double Sigmoid(double z) { return 1 / (1 + std::exp(-z)); }

// ---------------------------------------------------------------------------
// Records and the request bodies that carry them

using DenseRecords = std::vector<std::vector<float>>;
// A record's nonzero features: (0-based index, value).
using SparseRecord = std::vector<std::pair<uint64_t, float>>;
using SparseRecords = std::vector<SparseRecord>;

// Four records for the 4-feature models. For BinaryModel their sums are
// 7.125, 0.125 (sigmoid 0.53: labelled 0 at threshold 0.7, 1 at 0.5), -1.125
// and 1 (sigmoid 0.73: labelled 1).
const DenseRecords& FourRecords() {
  static const DenseRecords kRecords = {
      {1, 2, 3, 4}, {0.5f, 0.25f, 0, 0.125f}, {-1, 0, 2, -0.5f}, {0, 0, 0, 0.5625f}};
  return kRecords;
}

// Records for SparseModel: seen features, an unseen one next to a seen one,
// and an index far past every feature the model has.
const SparseRecords& SparseRecordsForSparseModel() {
  static const SparseRecords kRecords = {
      {{0, 1}, {4, 2}}, {{999, 4}}, {{4, 1}, {7, 3}}, {{123456, 1}}, {{0, -0.5f}, {999, 1.5f}}};
  return kRecords;
}

SparseRecords NonzeroFeatures(const DenseRecords& records) {
  SparseRecords sparse;
  for (const std::vector<float>& record : records) {
    sparse.emplace_back();
    for (size_t j = 0; j < record.size(); ++j) {
      if (record[j] != 0) sparse.back().emplace_back(j, record[j]);
    }
  }
  return sparse;
}

// Every value used here is exact in binary: %.9g writes it exactly.
std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

std::string Joined(const std::vector<std::string>& parts, const std::string& separator) {
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) text += (i > 0 ? separator : "") + parts[i];
  return text;
}

std::string CsvBody(const DenseRecords& records) {
  std::string body;
  for (const std::vector<float>& record : records) {
    std::vector<std::string> fields;
    for (float value : record) fields.push_back(Number(value));
    body += Joined(fields, ",") + "\n";
  }
  return body;
}

// 1-based "index:value" lines, as the models here were trained on.
std::string LibsvmBody(const SparseRecords& records) {
  std::string body;
  for (const SparseRecord& record : records) {
    std::vector<std::string> tokens;
    for (const auto& [index, value] : record) {
      tokens.push_back(std::to_string(index + 1) + ":" + Number(value));
    }
    body += Joined(tokens, " ") + "\n";
  }
  return body;
}

std::string JsonArray(const std::vector<float>& values) {
  std::vector<std::string> numbers;
  for (float value : values) numbers.push_back(Number(value));
  return "[" + Joined(numbers, ",") + "]";
}

// SageMaker's sparse form; `shape` 0: none given.
std::string JsonSparse(const SparseRecord& record, uint64_t shape) {
  std::vector<std::string> keys, values;
  for (const auto& [index, value] : record) {
    keys.push_back(std::to_string(index));
    values.push_back(Number(value));
  }
  return "{\"keys\":[" + Joined(keys, ",") + "],\"values\":[" + Joined(values, ",") + "]" +
         (shape > 0 ? ",\"shape\":[" + std::to_string(shape) + "]" : "") + "}";
}

std::vector<std::string> JsonDenseFeatures(const DenseRecords& records) {
  std::vector<std::string> features;
  for (const std::vector<float>& record : records) features.push_back(JsonArray(record));
  return features;
}

std::vector<std::string> JsonSparseFeatures(const SparseRecords& records, uint64_t shape) {
  std::vector<std::string> features;
  for (const SparseRecord& record : records) features.push_back(JsonSparse(record, shape));
  return features;
}

// {"instances": [FEATURES, ...]}
std::string JsonBody(const std::vector<std::string>& features) {
  return "{\"instances\":[" + Joined(features, ",") + "]}";
}

// An instance per line, in each of the three forms in turn: FEATURES,
// {"features": FEATURES}, {"data": {"features": FEATURES}}.
std::string JsonLinesBody(const std::vector<std::string>& features) {
  std::string body;
  for (size_t i = 0; i < features.size(); ++i) {
    switch (i % 3) {
      case 0:
        body += features[i];
        break;
      case 1:
        body += "{\"features\":" + features[i] + "}";
        break;
      default:
        body += "{\"data\":{\"features\":" + features[i] + "}}";
    }
    body += "\n";
  }
  return body;
}

std::string DenseRecordIOBody(const DenseRecords& records) {
  std::vector<aialgs::data::Record> protos(records.size());
  for (size_t r = 0; r < records.size(); ++r) {
    auto* tensor = (*protos[r].mutable_features())["values"].mutable_float32_tensor();
    for (float value : records[r]) tensor->add_values(value);
  }
  return testing::RecordIOBody(protos);
}

// `shape` 0: none given.
std::string SparseRecordIOBody(const SparseRecords& records, uint64_t shape) {
  std::vector<aialgs::data::Record> protos(records.size());
  for (size_t r = 0; r < records.size(); ++r) {
    auto* tensor = (*protos[r].mutable_features())["values"].mutable_float32_tensor();
    for (const auto& [index, value] : records[r]) {
      tensor->add_keys(index);
      tensor->add_values(value);
    }
    if (shape > 0) tensor->add_shape(shape);
  }
  return testing::RecordIOBody(protos);
}

struct Request {
  std::string name;  // for messages
  std::string content_type;
  std::string body;
};

// `records` (of `width` features) in every request format.
std::vector<Request> DenseRequests(const DenseRecords& records, uint64_t width) {
  const SparseRecords sparse = NonzeroFeatures(records);
  return {
      {"csv", "text/csv", CsvBody(records)},
      {"libsvm", "text/libsvm", LibsvmBody(sparse)},
      {"json dense", "application/json", JsonBody(JsonDenseFeatures(records))},
      {"json sparse", "application/json", JsonBody(JsonSparseFeatures(sparse, width))},
      {"jsonlines dense", "application/jsonlines", JsonLinesBody(JsonDenseFeatures(records))},
      {"jsonlines sparse", "application/jsonlines",
       JsonLinesBody(JsonSparseFeatures(sparse, width))},
      {"recordio dense", "application/x-recordio-protobuf", DenseRecordIOBody(records)},
      {"recordio sparse", "application/x-recordio-protobuf", SparseRecordIOBody(sparse, width)},
  };
}

// Sparse `records` in every request format that carries indices.
std::vector<Request> SparseRequests(const SparseRecords& records) {
  return {
      {"libsvm", "text/libsvm", LibsvmBody(records)},
      {"json sparse", "application/json", JsonBody(JsonSparseFeatures(records, 0))},
      {"jsonlines sparse", "application/jsonlines", JsonLinesBody(JsonSparseFeatures(records, 0))},
      {"recordio sparse", "application/x-recordio-protobuf", SparseRecordIOBody(records, 0)},
  };
}

// The response types: the Accept header and `keel predict --accept`'s name.
struct ResponseType {
  std::string accept;
  std::string predict_name;
};

const std::vector<ResponseType>& ResponseTypes() {
  static const std::vector<ResponseType> kTypes = {
      {"application/json", "json"},
      {"application/jsonlines", "jsonlines"},
      {"application/x-recordio-protobuf", "recordio"},
      {"text/csv", "csv"},
  };
  return kTypes;
}

// ---------------------------------------------------------------------------
// Reading answers

// The "predictions" of a JSON answer; fails the test (and gives none) if
// the answer is not JSON of that shape.
std::vector<JsonValue> JsonPredictions(const std::string& body) {
  try {
    const JsonValue json = ParseJson(body, "the answer");
    const JsonValue* predictions = json.Find("predictions");
    if (predictions != nullptr && predictions->type() == JsonValue::Type::kArray) {
      return predictions->AsArray();
    }
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
  ADD_FAILURE() << "no \"predictions\" array in " << body;
  return {};
}

double ScoreOf(const JsonValue& prediction) { return prediction.Find("score")->AsNumber(); }

int LabelOf(const JsonValue& prediction) {
  return static_cast<int>(prediction.Find("predicted_label")->AsNumber());
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

// ---------------------------------------------------------------------------
// A raw TCP client, for a request sent in two parts with a signal between.

class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(testing::ConnectToLoopback(port)) {}
  ~RawConnection() {
    if (fd_ >= 0) close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return fd_ >= 0; }

  // The client's end's port.
  int local_port() const {
    sockaddr_in address{};
    socklen_t length = sizeof(address);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    return ntohs(address.sin_port);
  }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t sent = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (sent <= 0) return false;
      data.remove_prefix(static_cast<size_t>(sent));
    }
    return true;
  }

  // What the server sends until it closes the connection, within `timeout_s`.
  std::string ReceiveUntilClosed(double timeout_s) {
    std::string received;
    const double deadline = MonotonicSeconds() + timeout_s;
    char buffer[1 << 16];
    while (MonotonicSeconds() < deadline) {
      pollfd readable{fd_, POLLIN, 0};
      if (poll(&readable, 1, 100) <= 0) continue;
      const ssize_t got = recv(fd_, buffer, sizeof(buffer), 0);
      if (got <= 0) break;
      received.append(buffer, static_cast<size_t>(got));
    }
    return received;
  }

 private:
  int fd_;
};

// A TCP socket of this machine's IPv4 table (/proc/net/tcp).
struct TcpSocket {
  unsigned local_port = 0, remote_port = 0, state = 0;
  unsigned long unread = 0;  // received, not yet read by its process
};

std::vector<TcpSocket> TcpSockets() {
  std::vector<TcpSocket> sockets;
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // the heading
  while (std::getline(table, line)) {
    TcpSocket socket;
    if (std::sscanf(line.c_str(), " %*u: %*x:%x %*x:%x %x %*x:%lx", &socket.local_port,
                    &socket.remote_port, &socket.state, &socket.unread) == 4) {
      sockets.push_back(socket);
    }
  }
  return sockets;
}

constexpr unsigned kTcpListen = 0x0A;

bool Listening(int port) {
  for (const TcpSocket& socket : TcpSockets()) {
    if (socket.local_port == static_cast<unsigned>(port) && socket.state == kTcpListen) return true;
  }
  return false;
}

// Whether the server on `port` has read everything its connection from
// client port `client_port` received.
bool ServerReadAll(int port, int client_port) {
  for (const TcpSocket& socket : TcpSockets()) {
    if (socket.local_port == static_cast<unsigned>(port) &&
        socket.remote_port == static_cast<unsigned>(client_port) && socket.state != kTcpListen) {
      return socket.unread == 0;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------
// The fixture: one `keel serve` on a free loopback port, stopped at the end.

class ServeProcess : public testing::TempFolderTest {
 protected:
  ServeProcess() : TempFolderTest("serve") {}

  ~ServeProcess() override {
    // SIGTERM first (it drains); whatever still runs is killed by processes_.
    if (serve_ > 0 && !processes_.Exited(serve_)) {
      kill(serve_, SIGTERM);
      processes_.Wait(serve_, 30);
    }
  }

  // Starts `keel serve` on model_dir_ with `flags` besides, and reads its port
  // into port_ (false, with its output, if none comes).
  ::testing::AssertionResult StartServe(const std::vector<std::string>& flags = {}) {
    const std::string port_file = folder_ + "/serve.port";
    std::vector<std::string> argv = {KeelBinary(),
                                     "serve",
                                     "--model_dir=" + model_dir_,
                                     "--serve_port=0",
                                     "--serve_threads=2",
                                     "--port_file=" + port_file};
    argv.insert(argv.end(), flags.begin(), flags.end());
    serve_ = processes_.Start(argv);
    const std::string port = testing::WaitForPortFile(port_file, 30);
    if (port.empty()) return ::testing::AssertionFailure() << "no port file: " << ServeLog();
    port_ = std::stoi(port);
    return ::testing::AssertionSuccess();
  }

  // Writes `model` to model_dir_, serves it and waits until /ping says it is in.
  ::testing::AssertionResult Serve(const ModelArtifact& model,
                                   const std::vector<std::string>& flags = {}) {
    model.Write(model_dir_);
    const ::testing::AssertionResult started = StartServe(flags);
    if (!started) return started;
    if (!WaitFor([&] { return testing::HttpGet(port_, "/ping").status == 200; }, 30)) {
      return ::testing::AssertionFailure() << "/ping never answered 200: " << ServeLog();
    }
    return ::testing::AssertionSuccess();
  }

  std::string ServeLog() const { return processes_.Output(serve_); }

  // POST /invocations with the tests' own client; `accept` "" sends no Accept.
  HttpAnswer Post(const std::string& content_type, const std::string& body,
                  const std::string& accept = "application/json") {
    std::multimap<std::string, std::string> headers;
    if (!accept.empty()) headers.emplace("Accept", accept);
    return testing::HttpPost(port_, "/invocations", body, content_type, headers, 30);
  }

  // POST /invocations with curl; "" for `content_type` or `accept` sends no
  // such header. Status 0 (and curl's output as the body) if curl failed.
  HttpAnswer Curl(const std::string& content_type, const std::string& body,
                  const std::string& accept = "application/json") {
    const std::string request = WriteFile("curl.request", body);
    return RunCurl({"--data-binary", "@" + request, "--header", "Content-Type: " + content_type,
                    "--header", "Accept: " + accept, "--header", "Expect:", Url("/invocations")});
  }

  HttpAnswer CurlGet(const std::string& path) { return RunCurl({Url(path)}); }

  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  HttpAnswer RunCurl(const std::vector<std::string>& arguments) {
    const std::string curl = testing::SystemTool("curl");
    HttpAnswer answer;
    if (curl.empty()) {
      ADD_FAILURE() << "curl is not installed";
      return answer;
    }
    const std::string response = folder_ + "/curl.response";
    std::remove(response.c_str());
    std::vector<std::string> argv = {curl,         "--silent",    "--show-error",
                                     "--max-time", "30",          "--output",
                                     response,     "--write-out", "%{http_code} %{content_type}"};
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    const testing::Exit exit = testing::Run(argv, 60);
    last_curl_exit_ = exit.code;
    if (!exit.finished || exit.code != 0) {
      answer.body = exit.output;
      return answer;
    }
    const size_t space = exit.output.find(' ');
    answer.status = std::stoi(exit.output.substr(0, space));
    answer.content_type = space == std::string::npos ? "" : exit.output.substr(space + 1);
    answer.body = testing::ReadFileOrEmpty(response);
    return answer;
  }

  // What `keel predict --accept=`name`` writes for the records of file `data`
  // with the model in `model_dir`.
  std::string Predict(const std::string& data, const std::string& name,
                      const std::string& model_dir) {
    const std::string out = folder_ + "/predictions." + name;
    const testing::Exit exit = testing::Run({KeelBinary(), "predict", "--model_dir=" + model_dir,
                                             "--data=" + data, "--out=" + out, "--accept=" + name},
                                            60);
    EXPECT_EQ(exit.code, 0) << exit.output;
    return testing::ReadFileOrEmpty(out);
  }
  std::string Predict(const std::string& data, const std::string& name) {
    return Predict(data, name, model_dir_);
  }

  // `body` of response type `accept` as text to compare: itself, or for
  // recordIO each record's tensors by name (in name order: protobuf writes a
  // map's entries in no fixed order) with their values to float precision.
  std::string Readable(const std::string& accept, const std::string& body) {
    if (accept != "application/x-recordio-protobuf") return body;
    RecordIOReader reader(InputSplit{WriteFile("answer.recordio", body)});
    std::string text;
    std::string_view payload;
    aialgs::data::Record record;
    while (reader.ReadRecord(&payload)) {
      if (!record.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
        return "not a Record: " + std::string(payload);
      }
      for (const auto* part : {&record.features(), &record.label()}) {
        const std::map<std::string, aialgs::data::Value> sorted(part->begin(), part->end());
        for (const auto& [name, value] : sorted) {
          text += (part == &record.label() ? "label " : "features ") + name + ":";
          if (!value.has_float32_tensor()) text += " not a float32 tensor";
          for (float number : value.float32_tensor().values()) text += " " + Number(number);
          for (uint64_t key : value.float32_tensor().keys()) text += " key " + std::to_string(key);
          text += "; ";
        }
      }
      text += "\n";
    }
    return text;
  }

  std::map<std::string, double> Metrics() {
    return testing::ParseExposition(testing::HttpGet(port_, "/metrics").body);
  }

  // ExpectAnsweredAsPredictWrites for FourRecords, in every dense format.
  void ExpectFourRecordsAnsweredAsPredictWrites() {
    ExpectAnsweredAsPredictWrites(DenseRequests(FourRecords(), 4),
                                  WriteFile("records.csv", CsvBody(FourRecords())));
  }

  // Each request in each response type, sent by curl and by the tests' own
  // client, is answered 200 with exactly what `keel predict` writes for
  // `data` (the same records in a file) in that type.
  void ExpectAnsweredAsPredictWrites(const std::vector<Request>& requests,
                                     const std::string& data) {
    for (const ResponseType& type : ResponseTypes()) {
      const std::string predicted = Predict(data, type.predict_name);
      ASSERT_FALSE(predicted.empty()) << type.predict_name;
      for (const Request& request : requests) {
        for (const auto& [client, answer] :
             {std::pair{"curl", Curl(request.content_type, request.body, type.accept)},
              std::pair{"httplib", Post(request.content_type, request.body, type.accept)}}) {
          SCOPED_TRACE(std::string(client) + ": " + request.name + " answered as " + type.accept);
          EXPECT_EQ(answer.status, 200) << answer.body;
          EXPECT_EQ(answer.content_type, type.accept);
          EXPECT_EQ(Readable(type.accept, answer.body), Readable(type.accept, predicted));
        }
      }
    }
  }

  // A bad request, sent by curl and by the tests' own client, is refused
  // with `status` and a message holding each of `parts`.
  void ExpectRefused(const Request& request, int status, const std::vector<std::string>& parts,
                     const std::string& accept = "application/json") {
    for (const auto& [client, answer] :
         {std::pair{"curl", Curl(request.content_type, request.body, accept)},
          std::pair{"httplib", Post(request.content_type, request.body, accept)}}) {
      SCOPED_TRACE(std::string(client) + ": " + request.name);
      EXPECT_EQ(answer.status, status) << answer.body;
      for (const std::string& part : parts) EXPECT_TRUE(Contains(answer.body, part)) << answer.body;
    }
  }

  // The predictions of `records` sent as CSV and answered in JSON Lines, one
  // a record (parse errors and a status other than 200 fail the test).
  std::vector<JsonValue> JsonLinesPredictions(const DenseRecords& records) {
    const HttpAnswer answer = Curl("text/csv", CsvBody(records), "application/jsonlines");
    EXPECT_EQ(answer.status, 200) << answer.body;
    std::vector<JsonValue> predictions;
    for (const std::string& line : Lines(answer.body)) {
      predictions.push_back(ParseJson(line, "the answer's line " + line));
    }
    return predictions;
  }

  testing::Processes processes_;
  const std::string model_dir_ = folder_ + "/model";
  pid_t serve_ = 0;
  int port_ = 0;
  int last_curl_exit_ = 0;
};

// ---------------------------------------------------------------------------
// Answers: what predict writes, and what the weights give by hand

TEST_F(ServeProcess, BinaryClassifierAnswersEveryFormatInEveryResponseTypeAsPredictWrites) {
  ASSERT_TRUE(Serve(BinaryModel()));
  ExpectFourRecordsAnsweredAsPredictWrites();
}

TEST_F(ServeProcess, MulticlassClassifierAnswersEveryFormatInEveryResponseTypeAsPredictWrites) {
  ASSERT_TRUE(Serve(MulticlassModel()));
  ExpectFourRecordsAnsweredAsPredictWrites();
}

TEST_F(ServeProcess, RegressorAnswersEveryFormatInEveryResponseTypeAsPredictWrites) {
  ASSERT_TRUE(Serve(RegressorModel()));
  ExpectFourRecordsAnsweredAsPredictWrites();
}

TEST_F(ServeProcess, SparseLibsvmModelAnswersEveryFormatInEveryResponseTypeAsPredictWrites) {
  ASSERT_TRUE(Serve(SparseModel()));
  ExpectAnsweredAsPredictWrites(
      SparseRequests(SparseRecordsForSparseModel()),
      WriteFile("records.libsvm", LibsvmBody(SparseRecordsForSparseModel())));
}

TEST_F(ServeProcess, FactorizationMachineBinaryClassifierAnswersAsPredictWritesAndByHand) {
  const ModelArtifact model = FactorizationMachineModel(PredictorType::kBinaryClassifier);
  ASSERT_TRUE(Serve(model));
  ExpectFourRecordsAnsweredAsPredictWrites();
  const std::vector<JsonValue> predictions = JsonLinesPredictions(FourRecords());
  ASSERT_EQ(predictions.size(), 4u);
  for (size_t r = 0; r < predictions.size(); ++r) {
    EXPECT_NEAR(ScoreOf(predictions[r]), Sigmoid(FactorizationMachineSum(model, FourRecords()[r])),
                1e-6)
        << "record " << r + 1;
  }
}

TEST_F(ServeProcess, FactorizationMachineRegressorAnswersAsPredictWritesAndByHand) {
  const ModelArtifact model = FactorizationMachineModel(PredictorType::kRegressor);
  ASSERT_TRUE(Serve(model));
  ExpectFourRecordsAnsweredAsPredictWrites();
  const std::vector<JsonValue> predictions = JsonLinesPredictions(FourRecords());
  ASSERT_EQ(predictions.size(), 4u);
  for (size_t r = 0; r < predictions.size(); ++r) {
    EXPECT_NEAR(ScoreOf(predictions[r]), FactorizationMachineSum(model, FourRecords()[r]), 1e-4)
        << "record " << r + 1;
    EXPECT_EQ(predictions[r].Find("predicted_label"), nullptr) << "record " << r + 1;
  }
}

TEST_F(ServeProcess, BinaryScoreIsTheSigmoidOfTheWeightedSumLabelledByTheTunedThreshold) {
  const ModelArtifact model = BinaryModel();
  ASSERT_TRUE(Serve(model));
  const HttpAnswer answer = Curl("text/csv", CsvBody(FourRecords()));
  ASSERT_EQ(answer.status, 200) << answer.body;
  const std::vector<JsonValue> predictions = JsonPredictions(answer.body);
  ASSERT_EQ(predictions.size(), 4u) << answer.body;
  const SparseRecords records = NonzeroFeatures(FourRecords());
  for (size_t r = 0; r < records.size(); ++r) {
    const double score = Sigmoid(WeightedSum(model, records[r]));
    EXPECT_NEAR(ScoreOf(predictions[r]), score, 1e-6) << "record " << r + 1;
    EXPECT_EQ(LabelOf(predictions[r]), score >= 0.7 ? 1 : 0) << "record " << r + 1;
  }
  // Record 2 scores 0.53: labelled 0 by the tuned threshold 0.7, where the
  // default 0.5 would say 1.
  EXPECT_NEAR(ScoreOf(predictions[1]), 0.5312094, 1e-6);
  EXPECT_EQ(LabelOf(predictions[1]), 0);
  EXPECT_EQ(LabelOf(predictions[3]), 1);
}

TEST_F(ServeProcess, RecordIOAnswersHoldTheScoreAndLabelAsFloat32Tensors) {
  const ModelArtifact model = BinaryModel();
  ASSERT_TRUE(Serve(model));
  const HttpAnswer answer =
      Curl("text/csv", CsvBody(FourRecords()), "application/x-recordio-protobuf");
  ASSERT_EQ(answer.status, 200) << answer.body;
  RecordIOReader reader(InputSplit{WriteFile("answer.recordio", answer.body)});
  const SparseRecords records = NonzeroFeatures(FourRecords());
  std::string_view payload;
  size_t r = 0;
  for (; reader.ReadRecord(&payload); ++r) {
    ASSERT_LT(r, records.size());
    aialgs::data::Record record;
    ASSERT_TRUE(record.ParseFromArray(payload.data(), static_cast<int>(payload.size())));
    ASSERT_EQ(record.label().count("score"), 1u);
    ASSERT_EQ(record.label().count("predicted_label"), 1u);
    const auto& score = record.label().at("score").float32_tensor().values();
    const auto& label = record.label().at("predicted_label").float32_tensor().values();
    ASSERT_EQ(score.size(), 1);
    ASSERT_EQ(label.size(), 1);
    const double expected = Sigmoid(WeightedSum(model, records[r]));
    EXPECT_NEAR(score[0], expected, 1e-6) << "record " << r + 1;
    EXPECT_EQ(label[0], expected >= 0.7 ? 1.0f : 0.0f) << "record " << r + 1;
  }
  EXPECT_EQ(r, records.size());
}

TEST_F(ServeProcess, MulticlassScoresAreTheSoftmaxOfEachClasssWeightedSum) {
  const ModelArtifact model = MulticlassModel();
  ASSERT_TRUE(Serve(model));
  const HttpAnswer answer = Post("application/json", JsonBody(JsonDenseFeatures(FourRecords())));
  ASSERT_EQ(answer.status, 200) << answer.body;
  const std::vector<JsonValue> predictions = JsonPredictions(answer.body);
  ASSERT_EQ(predictions.size(), 4u) << answer.body;
  for (size_t r = 0; r < FourRecords().size(); ++r) {
    std::vector<double> sums(3);
    for (int c = 0; c < 3; ++c) {
      sums[c] = model.bias[c];
      for (size_t i = 0; i < 4; ++i) {
        sums[c] += double{model.weights[i * 3 + c]} * FourRecords()[r][i];
      }
    }
    double total = 0;
    for (double sum : sums) total += std::exp(sum);
    const std::vector<JsonValue>& scores = predictions[r].Find("score")->AsArray();
    ASSERT_EQ(scores.size(), 3u);
    int most_probable = 0;
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(scores[c].AsNumber(), std::exp(sums[c]) / total, 1e-6) << "record " << r + 1;
      if (sums[c] > sums[most_probable]) most_probable = c;
    }
    EXPECT_EQ(LabelOf(predictions[r]), most_probable) << "record " << r + 1;
  }
}

TEST_F(ServeProcess, RegressorScoreIsTheWeightedSumWithNoLabel) {
  const ModelArtifact model = RegressorModel();
  ASSERT_TRUE(Serve(model));
  const HttpAnswer answer = Curl("text/csv", CsvBody(FourRecords()), "application/jsonlines");
  ASSERT_EQ(answer.status, 200) << answer.body;
  const std::vector<std::string> lines = Lines(answer.body);
  ASSERT_EQ(lines.size(), 4u) << answer.body;
  const SparseRecords records = NonzeroFeatures(FourRecords());
  for (size_t r = 0; r < records.size(); ++r) {
    const JsonValue prediction = ParseJson(lines[r], "line " + std::to_string(r + 1));
    EXPECT_NEAR(ScoreOf(prediction), WeightedSum(model, records[r]), 1e-5) << lines[r];
    EXPECT_EQ(prediction.Find("predicted_label"), nullptr) << lines[r];
  }
}

TEST_F(ServeProcess, SparseKeysAreZeroBasedWhereLibsvmIndicesOfAOneBasedModelStartAtOne) {
  const ModelArtifact model = SparseModel();
  ASSERT_TRUE(Serve(model));
  // Feature 4 (0-based) is JSON key 4 and libsvm index 5; feature 7 is unseen.
  const HttpAnswer json =
      Post("application/json", R"({"instances":[{"keys":[4,7],"values":[1,3]}]})");
  const HttpAnswer libsvm = Curl("text/libsvm", "5:1 8:3\n");
  ASSERT_EQ(json.status, 200) << json.body;
  ASSERT_EQ(libsvm.status, 200) << libsvm.body;
  EXPECT_EQ(json.body, libsvm.body);
  const std::vector<JsonValue> predictions = JsonPredictions(json.body);
  ASSERT_EQ(predictions.size(), 1u);
  EXPECT_NEAR(ScoreOf(predictions[0]), Sigmoid(-0.75 + 0.0625), 1e-6);
}

TEST_F(ServeProcess, AnswersJsonWhenTheAcceptHeaderIsMissingOrAcceptsAnything) {
  ASSERT_TRUE(Serve(BinaryModel()));
  const std::string expected = Predict(WriteFile("records.csv", CsvBody(FourRecords())), "json");
  for (const char* accept : {"", "*/*", "application/*"}) {
    for (const HttpAnswer& answer : {Curl("text/csv", CsvBody(FourRecords()), accept),
                                     Post("text/csv", CsvBody(FourRecords()), accept)}) {
      EXPECT_EQ(answer.status, 200) << "Accept '" << accept << "': " << answer.body;
      EXPECT_EQ(answer.content_type, "application/json") << "Accept '" << accept << "'";
      EXPECT_EQ(answer.body, expected) << "Accept '" << accept << "'";
    }
  }
}

TEST_F(ServeProcess, AHundredRecordRequestGetsAHundredPredictionsInOrder) {
  const ModelArtifact model = BinaryModel();
  ASSERT_TRUE(Serve(model));
  // Record i: x0 = i / 8 - 6, so the scores rise with i (from 0.05 to 0.998).
  DenseRecords records;
  for (int i = 0; i < 100; ++i) records.push_back({i / 8.0f - 6, 0, 0, 0});
  const HttpAnswer answer = Post("application/json", JsonBody(JsonDenseFeatures(records)));
  ASSERT_EQ(answer.status, 200) << answer.body;
  const std::vector<JsonValue> predictions = JsonPredictions(answer.body);
  ASSERT_EQ(predictions.size(), 100u);
  const SparseRecords sparse = NonzeroFeatures(records);
  for (size_t r = 0; r < records.size(); ++r) {
    EXPECT_NEAR(ScoreOf(predictions[r]), Sigmoid(WeightedSum(model, sparse[r])), 1e-6)
        << "record " << r + 1;
  }
  // As CSV through curl: predict's 100 lines, in its order.
  const std::string csv = CsvBody(records);
  const HttpAnswer lines = Curl("text/csv", csv, "text/csv");
  EXPECT_EQ(lines.status, 200) << lines.body;
  EXPECT_EQ(Lines(lines.body).size(), 100u);
  EXPECT_EQ(lines.body, Predict(WriteFile("records.csv", csv), "csv"));
}

// ---------------------------------------------------------------------------
// Bad requests: a 4xx naming the record and the problem

TEST_F(ServeProcess, AWrongFeatureCountIsRefused400NamingTheRecord) {
  ASSERT_TRUE(Serve(BinaryModel()));
  const DenseRecords records = {{1, 2, 3, 4}, {1, 2, 3}, {1, 2, 3, 4}};
  for (const Request& request :
       {Request{"csv", "text/csv", CsvBody(records)},
        Request{"json", "application/json", JsonBody(JsonDenseFeatures(records))},
        Request{"jsonlines", "application/jsonlines", JsonLinesBody(JsonDenseFeatures(records))},
        Request{"recordio", "application/x-recordio-protobuf", DenseRecordIOBody(records)}}) {
    ExpectRefused(request, 400, {"record 2", ": 3 features, the model takes 4"});
  }
}

TEST_F(ServeProcess, AnIndexOutOfRangeIsRefused400NamingTheRecordAndTheRange) {
  ASSERT_TRUE(Serve(BinaryModel()));
  const SparseRecords records = {{{0, 1}}, {{1, 1}, {4, 2}}, {{3, 1}}};
  for (const Request& request :
       {Request{"json", "application/json", JsonBody(JsonSparseFeatures(records, 0))},
        Request{"jsonlines", "application/jsonlines",
                JsonLinesBody(JsonSparseFeatures(records, 0))},
        Request{"recordio", "application/x-recordio-protobuf", SparseRecordIOBody(records, 0)}}) {
    ExpectRefused(
        request, 400,
        {"record 2", ": feature index 4 is out of range: the model takes indices 0 to 3"});
  }
  // libsvm's index 5 is feature 4 of this 1-based model: named in the client's numbering.
  ExpectRefused(
      {"libsvm", "text/libsvm", LibsvmBody(records)}, 400,
      {"record 2 (line 2): feature index 5 is out of range: the model takes indices 1 to 4"});
}

TEST_F(ServeProcess, ABadNumberIsRefused400NamingTheRecordAndTheValue) {
  ASSERT_TRUE(Serve(BinaryModel()));
  ExpectRefused({"csv", "text/csv", "1,2,3,4\n1,2,3,4\n1,2,abc,4\n"}, 400,
                {"record 3 (line 3): column 3: 'abc' is not a finite number"});
  ExpectRefused({"csv infinity", "text/csv", "1,2,3,4\n1,inf,3,4\n"}, 400,
                {"record 2 (line 2): column 2: 'inf' is not a finite number"});
  ExpectRefused({"libsvm", "text/libsvm", "1:1\n2:x\n"}, 400,
                {"record 2 (line 2): feature value 'x' is not a finite number"});
  ExpectRefused({"json", "application/json", R"({"instances":[[1,2,3,4],[1,"2",3,4]]})"}, 400,
                {"record 2: features[1] is a string, not a number"});
  ExpectRefused({"json beyond float32", "application/json", R"({"instances":[[1,2,3,1e39]]})"}, 400,
                {"record 1: features[3] is '1e39', beyond float32's range"});
  ExpectRefused(
      {"recordio", "application/x-recordio-protobuf",
       DenseRecordIOBody({{1, 2, 3, 4}, {1, 2, std::numeric_limits<float>::quiet_NaN(), 4}})},
      400, {"record 2: features[\"values\"][2] is not finite"});
}

TEST_F(ServeProcess, AnUnsupportedContentTypeIsRefused415NamingTheSupportedOnes) {
  ASSERT_TRUE(Serve(BinaryModel()));
  ExpectRefused({"image/png", "image/png", "1,2,3,4\n"}, 415,
                {"unsupported Content-Type 'image/png': supported are text/csv, text/libsvm, "
                 "application/json, application/jsonlines, application/x-recordio-protobuf"});
  // Without a Content-Type (which curl can send, not httplib).
  const HttpAnswer untyped = Curl("", "1,2,3,4\n");
  EXPECT_EQ(untyped.status, 415) << untyped.body;
  EXPECT_TRUE(Contains(untyped.body, "no Content-Type given: supported are text/csv"))
      << untyped.body;
}

TEST_F(ServeProcess, AnUnacceptableAcceptIsRefused406NamingTheSupportedOnes) {
  ASSERT_TRUE(Serve(BinaryModel()));
  ExpectRefused({"csv", "text/csv", "1,2,3,4\n"}, 406,
                {"no supported response type in Accept 'image/png': supported are "
                 "application/json, application/jsonlines, application/x-recordio-protobuf, "
                 "text/csv"},
                "image/png");
  // libsvm is a request format only.
  ExpectRefused({"csv", "text/csv", "1,2,3,4\n"}, 406,
                {"no supported response type in Accept 'text/libsvm'"}, "text/libsvm");
}

TEST_F(ServeProcess, ABodyOverMaxRequestBytesIsRefused413NamingTheLimit) {
  ASSERT_TRUE(Serve(BinaryModel(), {"--max_request_bytes=1024"}));
  const DenseRecords at_limit(128, {1, 2, 3, 4});  // "1,2,3,4\n": 8 bytes a record
  ASSERT_EQ(CsvBody(at_limit).size(), 1024u);
  EXPECT_EQ(Curl("text/csv", CsvBody(at_limit)).status, 200);
  EXPECT_EQ(Post("text/csv", CsvBody(at_limit)).status, 200);
  const DenseRecords over_limit(129, {1, 2, 3, 4});
  ExpectRefused({"1032 bytes", "text/csv", CsvBody(over_limit)}, 413,
                {"the request body is longer than this server's limit of 1024 bytes"});
}

// A chunked body has no length to hold against the limit before it is read,
// so it is refused before it is read.
TEST_F(ServeProcess, AChunkedBodyIsRefusedBeforeItIsRead) {
  ASSERT_TRUE(Serve(BinaryModel(), {"--max_request_bytes=1024"}));
  const std::string body = CsvBody(DenseRecords(1000, {1, 2, 3, 4}));  // 8000 bytes
  const HttpAnswer answer = RunCurl(
      {"--data-binary", "@" + WriteFile("body.csv", body), "--header", "Content-Type: text/csv",
       "--header", "Transfer-Encoding: chunked", "--header", "Expect:", Url("/invocations")});
  EXPECT_TRUE(answer.status == 413 || answer.status == 411)
      << answer.status << ": " << answer.body.substr(0, 200);
}

// A "Content-Encoding: gzip" body's length says nothing of what it inflates
// to (a few hundred kilobytes inflate to hundreds of megabytes), so a
// compressed body is refused before it is read.
TEST_F(ServeProcess, AGzipBodyIsRefusedBeforeItIsInflated) {
  ASSERT_TRUE(Serve(BinaryModel(), {"--max_request_bytes=1024"}));
  const std::string body = WriteFile("body.csv", CsvBody(DenseRecords(1000, {1, 2, 3, 4})));
  ASSERT_EQ(testing::Shell("gzip -9 -k " + body).code, 0);
  const HttpAnswer answer =
      RunCurl({"--data-binary", "@" + body + ".gz", "--header", "Content-Type: text/csv",
               "--header", "Content-Encoding: gzip", Url("/invocations")});
  EXPECT_TRUE(answer.status == 413 || answer.status == 415)
      << answer.status << ": " << answer.body.substr(0, 200);
}

TEST_F(ServeProcess, AfterEveryKindOfBadRequestTheServerStillServesAndCountsThemByKind) {
  ASSERT_TRUE(Serve(BinaryModel(), {"--max_request_bytes=1024"}));
  EXPECT_EQ(Post("text/csv", "1,2,3,4\n1,2,3\n").status, 400);
  EXPECT_EQ(Post("text/libsvm", "9:1\n").status, 400);
  EXPECT_EQ(Post("text/csv", "1,x,3,4\n").status, 400);
  EXPECT_EQ(Post("image/png", "1,2,3,4\n").status, 415);
  EXPECT_EQ(Post("text/csv", "1,2,3,4\n", "image/png").status, 406);
  EXPECT_EQ(Post("text/csv", CsvBody(DenseRecords(200, {1, 2, 3, 4}))).status, 413);

  EXPECT_EQ(CurlGet("/ping").status, 200);
  const HttpAnswer good = Curl("text/csv", CsvBody(FourRecords()), "text/csv");
  EXPECT_EQ(good.status, 200) << good.body;
  EXPECT_EQ(good.body, Predict(WriteFile("records.csv", CsvBody(FourRecords())), "csv"));

  const std::map<std::string, double> metrics = Metrics();
  const std::map<std::string, double> expected = {
      {R"(keel_serve_errors_total{kind="bad_record"})", 3},
      {R"(keel_serve_errors_total{kind="unsupported_type"})", 1},
      {R"(keel_serve_errors_total{kind="not_acceptable"})", 1},
      {R"(keel_serve_errors_total{kind="too_large"})", 1},
      {R"(keel_serve_requests_total{code="200"})", 1},
      {R"(keel_serve_requests_total{code="400"})", 3},
      {R"(keel_serve_requests_total{code="406"})", 1},
      {R"(keel_serve_requests_total{code="413"})", 1},
      {R"(keel_serve_requests_total{code="415"})", 1},
      {"keel_serve_records_total", 4},
  };
  for (const auto& [series, value] : expected) {
    const auto found = metrics.find(series);
    ASSERT_NE(found, metrics.end()) << series << " missing";
    EXPECT_EQ(found->second, value) << series;
  }
  EXPECT_EQ(metrics.count(R"(keel_serve_errors_total{kind="internal"})"), 0u);
}

// ---------------------------------------------------------------------------
// Loading and reloading

TEST_F(ServeProcess, PingAnswers503WhileNoModelIsLoadedAnd200OnceSighupLoadsOne) {
  std::filesystem::create_directories(model_dir_);
  ASSERT_TRUE(StartServe());
  // The first load finds an empty folder and fails.
  ASSERT_TRUE(WaitFor(
      [&] { return Metrics()[R"(keel_serve_model_loads_total{result="failed"})"] == 1; }, 30))
      << ServeLog();
  EXPECT_EQ(CurlGet("/ping").status, 503);
  EXPECT_EQ(testing::HttpGet(port_, "/ping").status, 503);
  EXPECT_EQ(Metrics()["keel_serve_model_loaded"], 0);

  BinaryModel().Write(model_dir_);
  kill(serve_, SIGHUP);
  EXPECT_TRUE(WaitFor([&] { return testing::HttpGet(port_, "/ping").status == 200; }, 30))
      << ServeLog();
  EXPECT_EQ(CurlGet("/ping").status, 200);
  const std::map<std::string, double> metrics = Metrics();
  EXPECT_EQ(metrics.at("keel_serve_model_loaded"), 1);
  EXPECT_EQ(metrics.at(R"(keel_serve_model_loads_total{result="ok"})"), 1);
  EXPECT_EQ(metrics.at(R"(keel_serve_model_loads_total{result="failed"})"), 1);
}

TEST_F(ServeProcess, InvocationsAnswer503NamingPingWhileNoModelIsLoaded) {
  std::filesystem::create_directories(model_dir_);
  ASSERT_TRUE(StartServe());
  ASSERT_TRUE(WaitFor(
      [&] { return Metrics()[R"(keel_serve_model_loads_total{result="failed"})"] == 1; }, 30))
      << ServeLog();
  ExpectRefused({"csv", "text/csv", CsvBody(FourRecords())}, 503,
                {"no model loaded yet (GET /ping says when one is)"});
  EXPECT_EQ(Metrics()[R"(keel_serve_errors_total{kind="no_model"})"], 2);
}

TEST_F(ServeProcess, SighupSwapsInTheRewrittenModelWithoutFailingARequest) {
  const std::string csv = CsvBody(FourRecords());
  const std::string data = WriteFile("records.csv", csv);
  const std::string other_dir = folder_ + "/other";
  OtherBinaryModel().Write(other_dir);
  const std::string other_answer = Predict(data, "csv", other_dir);
  ASSERT_TRUE(Serve(BinaryModel()));
  const std::string first_answer = Predict(data, "csv");
  ASSERT_NE(first_answer, other_answer);
  ASSERT_EQ(Post("text/csv", csv, "text/csv").body, first_answer);

  // A client asking again and again all through the reload.
  std::atomic<bool> stop{false};
  std::atomic<int> answers{0}, other_answers{0};
  std::vector<HttpAnswer> seen;
  std::thread client([&] {
    while (!stop) {
      seen.push_back(Post("text/csv", csv, "text/csv"));
      ++answers;
      if (seen.back().body == other_answer) ++other_answers;
    }
  });
  const bool asked = WaitFor([&] { return answers >= 5; }, 30);
  OtherBinaryModel().Write(model_dir_);
  kill(serve_, SIGHUP);
  const bool swapped = WaitFor([&] { return other_answers >= 5; }, 30);
  stop = true;
  client.join();
  ASSERT_TRUE(asked);
  ASSERT_TRUE(swapped) << ServeLog();

  // Every request answered 200, by the old model and then by the new one.
  bool swapped_in = false;
  for (size_t i = 0; i < seen.size(); ++i) {
    ASSERT_EQ(seen[i].status, 200) << "request " << i << ": " << seen[i].body;
    if (seen[i].body == other_answer) {
      swapped_in = true;
    } else {
      ASSERT_FALSE(swapped_in) << "request " << i << " answered by the old model after the new one";
      ASSERT_EQ(seen[i].body, first_answer) << "request " << i;
    }
  }
  EXPECT_EQ(Curl("text/csv", csv, "text/csv").body, other_answer);
  EXPECT_EQ(Metrics()[R"(keel_serve_model_loads_total{result="ok"})"], 2);
}

TEST_F(ServeProcess, SighupKeepsTheOldModelServingWhenWeightsNoLongerMatchTheManifest) {
  const std::string csv = CsvBody(FourRecords());
  ASSERT_TRUE(Serve(BinaryModel()));
  const std::string first_answer = Predict(WriteFile("records.csv", csv), "csv");
  ASSERT_EQ(Post("text/csv", csv, "text/csv").body, first_answer);
  // Another valid model's weights.bin under this model's manifest.
  const std::string other_dir = folder_ + "/other";
  OtherBinaryModel().Write(other_dir);
  testing::WriteFile(model_dir_ + "/weights.bin",
                     testing::ReadFileOrEmpty(other_dir + "/weights.bin"));
  kill(serve_, SIGHUP);
  // The load reads again for about a second before it gives up.
  EXPECT_TRUE(WaitFor(
      [&] { return Metrics()[R"(keel_serve_model_loads_total{result="failed"})"] == 1; }, 30))
      << ServeLog();
  EXPECT_EQ(Metrics()[R"(keel_serve_model_loads_total{result="ok"})"], 1);
  EXPECT_EQ(CurlGet("/ping").status, 200);
  EXPECT_EQ(Curl("text/csv", csv, "text/csv").body, first_answer);
  EXPECT_EQ(Post("text/csv", csv, "text/csv").body, first_answer);
}

// ---------------------------------------------------------------------------
// Stopping

TEST_F(ServeProcess, SigtermLetsTheRequestInFlightFinishThenExitsZeroAndClosesThePort) {
  ASSERT_TRUE(Serve(BinaryModel()));
  const DenseRecords records(20000, {0.5f, 0.25f, 0, 0.125f});
  const std::string body = CsvBody(records);
  const std::string head =
      "POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/csv\r\n"
      "Accept: text/csv\r\nConnection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  RawConnection connection(port_);
  ASSERT_TRUE(connection.connected());
  const size_t half = body.size() / 2;
  ASSERT_TRUE(connection.Send(head + body.substr(0, half)));
  // Once the server has read all that came, the request is in flight.
  ASSERT_TRUE(WaitFor([&] { return ServerReadAll(port_, connection.local_port()); }, 30));
  ASSERT_TRUE(Listening(port_));
  kill(serve_, SIGTERM);
  // It stops listening, the request still in flight.
  ASSERT_TRUE(WaitFor([&] { return !Listening(port_); }, 30)) << ServeLog();
  ASSERT_TRUE(connection.Send(body.substr(half)));

  const std::string answer = connection.ReceiveUntilClosed(30);
  EXPECT_EQ(answer.substr(0, answer.find("\r\n")), "HTTP/1.1 200 OK");
  const size_t end_of_head = answer.find("\r\n\r\n");
  ASSERT_NE(end_of_head, std::string::npos) << answer.substr(0, 1000);
  const std::vector<std::string> lines = Lines(answer.substr(end_of_head + 4));
  ASSERT_EQ(lines.size(), records.size());
  for (const std::string& line : lines) ASSERT_EQ(line, lines[0]);
  EXPECT_EQ(lines[0], "0,0.5312094");

  const testing::Exit exit = processes_.Wait(serve_, 30);
  EXPECT_TRUE(exit.finished);
  EXPECT_EQ(exit.code, 0) << exit.output;
  EXPECT_EQ(CurlGet("/ping").status, 0);
  EXPECT_EQ(last_curl_exit_, 7);  // curl: "Failed to connect"
  EXPECT_EQ(testing::HttpGet(port_, "/ping").status, 0);
}

}  // namespace
}  // namespace keel
