#include "scheduler/progress_record.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "base/error.h"
#include "base/json.h"
#include "base/json_reader.h"

namespace keel {
namespace {

const char* TypeName(ProgressRecord::Type type) {
  switch (type) {
    case ProgressRecord::Type::kProgress:
      return "progress";
    case ProgressRecord::Type::kEpoch:
      return "epoch";
    case ProgressRecord::Type::kEnd:
      return "end";
  }
  return "progress";
}

std::string MetricsObject(const MetricSet& metrics) {
  JsonObject object(JsonObject::Style::kCompact);
  for (const auto& [name, value] : metrics) object.Number(name, value);
  return object.Close();
}

// `ranges` as a JSON array.
std::string RangeList(const std::vector<size_t>& ranges) {
  std::string list;
  for (size_t range : ranges) list += (list.empty() ? "" : ",") + std::to_string(range);
  return "[" + list + "]";
}

// Readers of a record's members: a missing member leaves the default.
double NumberOf(const JsonValue& object, const char* name, double fallback) {
  const JsonValue* value = object.Find(name);
  if (!value || value->type() == JsonValue::Type::kNull) return fallback;
  return value->AsNumber();
}

uint64_t CountOf(const JsonValue& object, const char* name) {
  const JsonValue* value = object.Find(name);
  return value ? value->AsUint64() : 0;
}

int IntOf(const JsonValue& object, const char* name) {
  const uint64_t count = CountOf(object, name);
  if (count > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    throw MakeError("progress record: ", name, " ", count, " is too large");
  }
  return static_cast<int>(count);
}

bool BoolOf(const JsonValue& object, const char* name) {
  const JsonValue* value = object.Find(name);
  return value && value->AsBool();
}

std::string StringOf(const JsonValue& object, const char* name) {
  const JsonValue* value = object.Find(name);
  return value ? value->AsString() : std::string();
}

MetricSet MetricsOf(const JsonValue& object) {
  MetricSet metrics;
  const JsonValue* value = object.Find("metrics");
  if (!value) return metrics;
  for (const auto& [name, number] : value->AsObject()) {
    metrics[name] = number.type() == JsonValue::Type::kNull
                        ? std::numeric_limits<double>::quiet_NaN()
                        : number.AsNumber();
  }
  return metrics;
}

ProgressRecord::Type TypeOf(const std::string& name) {
  if (name == "progress") return ProgressRecord::Type::kProgress;
  if (name == "epoch") return ProgressRecord::Type::kEpoch;
  if (name == "end") return ProgressRecord::Type::kEnd;
  throw MakeError("progress record: unknown type '", name, "'");
}

}  // namespace

std::string FormatProgressRecord(const ProgressRecord& record) {
  JsonObject object(JsonObject::Style::kCompact);
  object.String("type", TypeName(record.type)).Count("epochs", record.epochs);
  switch (record.type) {
    case ProgressRecord::Type::kProgress:
      object.Count("epoch", record.epoch)
          .Count("examples", record.examples)
          .Count("expected", record.expected)
          .Number("rate", record.rate)
          .Number("fraction", record.fraction)
          .Number("eta", record.eta)
          .Number("loss", record.loss);
      break;
    case ProgressRecord::Type::kEpoch:
      object.Count("epoch", record.epoch)
          .Count("examples", record.examples)
          .Bool("stop", record.stop)
          .Add("metrics", MetricsObject(record.metrics));
      break;
    case ProgressRecord::Type::kEnd:
      object.Count("epochs_run", record.epochs_run)
          .Bool("stopped_early", record.stop)
          .Bool("reported", record.reported)
          .Count("examples", record.examples)
          .Count("failed_workers", record.failed_workers)
          .Add("metrics", MetricsObject(record.metrics))
          .String("model_dir", record.model_dir)
          .String("checkpoint_uri", record.checkpoint_uri)
          .Add("lost_ranges", RangeList(record.lost_ranges));
      break;
  }
  object.Number("seconds", record.seconds);
  return kProgressRecordPrefix + object.Close();
}

bool ParseProgressRecord(const std::string& line, ProgressRecord* record) {
  const std::string prefix = kProgressRecordPrefix;
  if (line.compare(0, prefix.size(), prefix) != 0) return false;
  const JsonValue object = ParseJson(line.substr(prefix.size()), "progress record");
  if (object.type() != JsonValue::Type::kObject) throw MakeError("progress record: not an object");
  ProgressRecord parsed;
  parsed.type = TypeOf(StringOf(object, "type"));
  parsed.epochs = IntOf(object, "epochs");
  parsed.epoch = IntOf(object, "epoch");
  parsed.examples = CountOf(object, "examples");
  parsed.expected = CountOf(object, "expected");
  parsed.rate = NumberOf(object, "rate", 0);
  parsed.fraction = NumberOf(object, "fraction", -1);
  parsed.eta = NumberOf(object, "eta", -1);
  parsed.loss = NumberOf(object, "loss", 0);
  parsed.seconds = NumberOf(object, "seconds", 0);
  parsed.stop =
      BoolOf(object, parsed.type == ProgressRecord::Type::kEnd ? "stopped_early" : "stop");
  parsed.epochs_run = IntOf(object, "epochs_run");
  parsed.reported = BoolOf(object, "reported");
  parsed.failed_workers = IntOf(object, "failed_workers");
  parsed.metrics = MetricsOf(object);
  parsed.model_dir = StringOf(object, "model_dir");
  parsed.checkpoint_uri = StringOf(object, "checkpoint_uri");
  if (const JsonValue* lost = object.Find("lost_ranges")) {
    for (const JsonValue& range : lost->AsArray()) parsed.lost_ranges.push_back(range.AsUint64());
  }
  *record = std::move(parsed);
  return true;
}

ProgressRecord ProgressRecordOf(const ProgressSnapshot& snapshot) {
  ProgressRecord record;
  record.type = ProgressRecord::Type::kProgress;
  record.epoch = snapshot.epoch;
  record.epochs = snapshot.epochs;
  record.examples = snapshot.epoch_done;
  record.expected = snapshot.epoch_expected;
  record.rate = snapshot.examples_per_second;
  record.fraction = snapshot.figures.epoch_fraction;
  record.eta = snapshot.figures.eta_seconds;
  record.loss = snapshot.training_loss;
  record.seconds = snapshot.seconds;
  return record;
}

ProgressRecord EpochRecordOf(const DecidedEpoch& epoch, int epochs) {
  ProgressRecord record;
  record.type = ProgressRecord::Type::kEpoch;
  record.epoch = epoch.epoch;
  record.epochs = epochs;
  record.examples = epoch.examples;
  record.seconds = epoch.seconds;
  record.stop = epoch.stop;
  record.metrics = epoch.metrics;
  return record;
}

ProgressRecord EndRecordOf(const ProgressSnapshot& snapshot, int failed_workers,
                           const std::string& checkpoint_uri,
                           const std::vector<size_t>& lost_ranges) {
  ProgressRecord record;
  record.lost_ranges = lost_ranges;
  record.type = ProgressRecord::Type::kEnd;
  record.epochs = snapshot.epochs;
  record.examples = snapshot.examples_read;
  record.seconds = snapshot.seconds;
  record.failed_workers = failed_workers;
  record.checkpoint_uri = checkpoint_uri;
  record.epochs_run = static_cast<int>(snapshot.decided.size());
  if (!snapshot.decided.empty()) {
    // The decided epochs' counts are exact; reports may not have caught the
    // last minibatches. A scheduler started again mid-job heard only the
    // epochs decided since: the leading worker's running total covers all.
    record.examples = 0;
    for (const DecidedEpoch& epoch : snapshot.decided) record.examples += epoch.examples;
    record.examples = std::max(record.examples, snapshot.decided.back().total_examples);
    // The last decided epoch's number, not how many it heard decided.
    record.epochs_run = std::max(record.epochs_run, snapshot.decided.back().epoch);
    record.seconds = snapshot.decided.back().seconds;
  }
  if (snapshot.end) {
    record.reported = true;
    record.epochs_run = snapshot.end->epochs_run;
    record.stop = snapshot.end->stopped_early;
    record.metrics = snapshot.end->metrics;
    record.model_dir = snapshot.end->model_dir;
  }
  return record;
}

}  // namespace keel
