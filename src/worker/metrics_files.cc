#include "worker/metrics_files.h"

#include <cmath>
#include <fstream>
#include <memory>

#include "base/error.h"
#include "base/files.h"
#include "base/json.h"
#include "io/storage.h"

namespace keel {
namespace {

std::string HistoryLine(int epoch, double seconds, uint64_t examples, const MetricSet& metrics,
                        const std::string& health) {
  JsonObject line;
  line.Integer("epoch", epoch).Number("seconds", seconds).Count("examples", examples);
  for (const auto& [name, value] : metrics) line.Number(name, std::isfinite(value) ? value : 0.0);
  if (!health.empty()) line.Add("health", health);
  return line.Close() + "\n";
}

// Objects cannot be appended to: reads the history so far and writes it back longer.
void AppendToObject(const std::string& model_dir, int epoch, const std::string& line) {
  const std::unique_ptr<Storage> storage = OpenStorage(model_dir);
  std::string history;
  if (epoch > 1) {
    try {
      history = storage->Get("history.jsonl");
    } catch (const NotFoundError&) {
    }
  }
  storage->Put("history.jsonl", history + line);
}

void AppendToFile(const std::string& model_dir, int epoch, const std::string& line) {
  MakeDirectories(model_dir);
  const std::string path = model_dir + "/history.jsonl";
  std::ofstream out(path, epoch == 1 ? std::ios::trunc : std::ios::app);
  out << line;
  if (!out) throw MakeError("cannot write ", path);
}

}  // namespace

void AppendHistory(const std::string& model_dir, int epoch, double seconds, uint64_t examples,
                   const MetricSet& metrics, const std::string& health) {
  if (model_dir.empty()) return;
  const std::string line = HistoryLine(epoch, seconds, examples, metrics, health);
  if (IsStorageUri(model_dir)) {
    AppendToObject(model_dir, epoch, line);
  } else {
    AppendToFile(model_dir, epoch, line);
  }
}

void WriteMetricsFile(const std::string& model_dir, const MetricSet& metrics) {
  OpenStorage(model_dir)->Put("metrics.json", MetricsJson(metrics));
}

}  // namespace keel
