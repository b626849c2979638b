#include "report/job_record.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "base/error.h"
#include "base/json_reader.h"
#include "io/storage.h"

namespace keel {
namespace {

// What a file of the record can be at most (a year of samples is well under).
constexpr uint64_t kMaxFileBytes = uint64_t{512} << 20;

using LineHandler = std::function<void(const JsonValue& line, const std::string& where)>;

// Calls `handle` with each non-empty line of `text` as a JSON object;
// `where` is "SOURCE:LINE".
void ForEachLine(const std::string& text, const std::string& source, const LineHandler& handle) {
  size_t begin = 0;
  for (int number = 1; begin < text.size(); ++number) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = source + ":" + std::to_string(number);
    const JsonValue value = ParseJson(line, where);
    if (value.type() != JsonValue::Type::kObject) {
      throw MakeError(where, ": a line must be a JSON object, not ",
                      JsonValue::TypeName(value.type()));
    }
    handle(value, where);
  }
}

const JsonValue& Member(const JsonValue& object, const std::string& name,
                        const std::string& where) {
  const JsonValue* member = object.Find(name);
  if (member == nullptr) throw MakeError(where, ": no \"", name, "\"");
  return *member;
}

double Number(const JsonValue& object, const std::string& name, const std::string& where) {
  const JsonValue& member = Member(object, name, where);
  if (member.type() == JsonValue::Type::kNull) return 0;  // a non-finite figure
  if (member.type() != JsonValue::Type::kNumber) {
    throw MakeError(where, ": \"", name, "\" is ", JsonValue::TypeName(member.type()),
                    ", not a number");
  }
  return member.AsNumber();
}

double NumberOr(const JsonValue& object, const std::string& name, const std::string& where,
                double fallback) {
  return object.Find(name) ? Number(object, name, where) : fallback;
}

// A count or an epoch: a whole number from 0 to 2^53 (converting anything
// larger, or a fraction, would not mean what the file says).
uint64_t Count(const JsonValue& object, const std::string& name, const std::string& where) {
  const double value = Number(object, name, where);
  if (!(value >= 0 && value <= 9007199254740992.0) || value != std::floor(value)) {
    throw MakeError(where, ": \"", name, "\" is ", value, ", not a whole number from 0 to 2^53");
  }
  return static_cast<uint64_t>(value);
}

uint64_t CountOr(const JsonValue& object, const std::string& name, const std::string& where) {
  return object.Find(name) ? Count(object, name, where) : 0;
}

int Epoch(const JsonValue& object, const std::string& where) {
  const uint64_t epoch = Count(object, "epoch", where);
  if (epoch > 1000000000) throw MakeError(where, ": \"epoch\" is ", epoch, ", beyond 10^9");
  return static_cast<int>(epoch);
}

std::string Text(const JsonValue& object, const std::string& name) {
  const JsonValue* member = object.Find(name);
  if (member == nullptr) return "";
  if (member->type() == JsonValue::Type::kString) return member->AsString();
  if (member->type() == JsonValue::Type::kNumber) {
    char text[32];
    snprintf(text, sizeof(text), "%.6g", member->AsNumber());
    return text;
  }
  if (member->type() == JsonValue::Type::kBool) return member->AsBool() ? "true" : "false";
  return "";
}

// "worker 1", "server *", "scheduler".
std::string Who(const JsonValue& line) {
  const std::string role = Text(line, "role"), rank = Text(line, "rank");
  return rank.empty() ? role : role + " " + rank;
}

void ReadHealth(const JsonValue& health, const std::string& where, HistoryEpoch* epoch) {
  if (health.type() != JsonValue::Type::kObject) {
    throw MakeError(where, ": \"health\" is ", JsonValue::TypeName(health.type()),
                    ", not an object of tables");
  }
  for (const auto& [table, figures] : health.AsObject()) {
    if (figures.type() != JsonValue::Type::kObject) {
      throw MakeError(where, ": \"health\".\"", table, "\" is ",
                      JsonValue::TypeName(figures.type()), ", not an object of figures");
    }
    for (const auto& [name, value] : figures.AsObject()) {
      if (value.type() == JsonValue::Type::kNumber) epoch->health[table][name] = value.AsNumber();
    }
  }
}

void ReadWorkerLine(const JsonValue& line, const std::string& where, WorkerTimeline* worker) {
  const std::string event = Text(line, "event");
  const double time = Number(line, "time", where);
  if (event == "sample") {
    worker->samples.push_back({time, Epoch(line, where), Number(line, "examples", where),
                               Number(line, "examples_per_second", where),
                               Number(line, "loss", where)});
  } else if (event == "epoch") {
    WorkerEpoch epoch;
    epoch.time = time;
    epoch.epoch = Epoch(line, where);
    epoch.seconds = Number(line, "seconds", where);
    epoch.pull_wait_seconds = Number(line, "pull_wait_seconds", where);
    epoch.held_seconds = NumberOr(line, "held_seconds", where, 0);
    epoch.pulls = CountOr(line, "pulls", where);
    epoch.held_pulls = CountOr(line, "held_pulls", where);
    if (const JsonValue* histogram = line.Find("staleness_histogram")) {
      if (histogram->type() != JsonValue::Type::kObject) {
        throw MakeError(where, ": \"staleness_histogram\" is not an object");
      }
      for (const auto& [bucket, count] : histogram->AsObject()) {
        epoch.staleness.emplace_back(bucket, count.AsUint64());
      }
    }
    worker->epochs.push_back(std::move(epoch));
  } else if (event != "start") {
    throw MakeError(where, ": unknown worker event '", event, "'");
  }
}

void ReadSchedulerLine(const JsonValue& line, const std::string& where, JobRecord* record) {
  const std::string event = Text(line, "event");
  const double time = Number(line, "time", where);
  if (event == "leave") {
    record->events.push_back({time, event, Who(line), Text(line, "reason")});
  } else if (event == "join") {
    // The cluster forming is not news; a node coming back or replacing one is.
    if (Text(line, "replaces") == "true") {
      record->events.push_back({time, event, Who(line), "replaces a departed node"});
    } else if (Text(line, "rejoin") == "true") {
      record->events.push_back({time, event, Who(line), "rejoins a restarted scheduler"});
    }
  } else if (event == "checkpoint") {
    CheckpointRecord checkpoint;
    checkpoint.id = Text(line, "id");
    checkpoint.started = Number(line, "started", where);
    checkpoint.seconds = Number(line, "seconds", where);
    checkpoint.bytes = CountOr(line, "bytes", where);
    checkpoint.files = static_cast<int>(std::min<uint64_t>(CountOr(line, "files", where), 1 << 30));
    checkpoint.error = Text(line, "error");
    record->checkpoints.push_back(checkpoint);
  } else if (event == "start") {
    if (record->scheduler_start == 0) record->scheduler_start = time;
  }
  // "view" lines: the members after a change, already marked by its join or leave.
}

void ReadLaunchLine(const JsonValue& line, const std::string& where, JobRecord* record) {
  const std::string event = Text(line, "event");
  const double time = Number(line, "time", where);
  if (event == "drop" || event == "delay") {
    record->transport_faults.push_back(
        event + " " + Who(line) +
        (event == "drop"
             ? ": share " + Text(line, "share")
             : ": " + Text(line, "delay_ms") + " ms, jitter " + Text(line, "jitter_ms") + " ms"));
    return;
  }
  if (event == "start" || event == "end" || event == "job_over") {
    if (event == "start" && record->launch_start == 0) record->launch_start = time;
    return;
  }
  std::string detail = Text(line, "spec");
  if (event == "exit") {
    const std::string status = Text(line, "status");
    // A clean exit is the job ending; an expected one follows a fault already marked.
    if (status == "exited with status 0" || Text(line, "expected") == "true") return;
    detail = status;
  }
  if (const std::string reason = Text(line, "reason"); !reason.empty()) detail += ": " + reason;
  record->events.push_back({time, event, Who(line), detail});
}

// The worker's rank in "worker-<rank>.jsonl"; -1 for another name.
int WorkerRank(const std::string& name) {
  const std::string prefix = "worker-", suffix = ".jsonl";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return -1;
  }
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoi(digits);
}

void ReadModelJson(const std::string& text, const std::string& source, JobRecord* record) {
  const JsonValue model = ParseJson(text, source);
  if (model.type() != JsonValue::Type::kObject) throw MakeError(source, ": not a JSON object");
  for (const auto& [name, value] : model.AsObject()) {
    if (name == "hyperparameters" && value.type() == JsonValue::Type::kObject) {
      for (const auto& [key, setting] : value.AsObject()) {
        const std::string text = Text(value, key);
        if (!text.empty()) record->hyperparameters.emplace_back(key, text);
      }
    } else if (name != "format_version" && name != "weights_file") {
      const std::string text = Text(model, name);
      if (!text.empty()) record->job.emplace_back(name, text);
    }
  }
}

void ReadMetricsJson(const std::string& text, const std::string& source, JobRecord* record) {
  const JsonValue metrics = ParseJson(text, source);
  if (metrics.type() != JsonValue::Type::kObject) throw MakeError(source, ": not a JSON object");
  for (const auto& [name, value] : metrics.AsObject()) {
    if (value.type() == JsonValue::Type::kNumber) record->final_metrics[name] = value.AsNumber();
  }
}

// The job's start from the scheduler's and the launcher's start lines (see
// JobRecord::start_time); 0 if neither has one.
double StartTime(const JobRecord& record) {
  const double scheduler = record.scheduler_start, launch = record.launch_start;
  if (scheduler == 0) return launch;
  return launch != 0 && launch <= scheduler && launch >= scheduler - 60 ? launch : scheduler;
}

// Drops lines older than the job's start: an earlier job's, in a file this
// job did not start anew.
void DropEarlierJobs(JobRecord* record) {
  if (record->start_time == 0) return;
  const double start = record->start_time - 1;  // clocks of one machine; a second's slack
  auto& events = record->events;
  events.erase(std::remove_if(events.begin(), events.end(),
                              [&](const JobEvent& e) { return e.time < start; }),
               events.end());
  for (auto& [rank, worker] : record->workers) {
    auto& samples = worker.samples;
    samples.erase(std::remove_if(samples.begin(), samples.end(),
                                 [&](const WorkerSample& s) { return s.time < start; }),
                  samples.end());
    auto& epochs = worker.epochs;
    epochs.erase(std::remove_if(epochs.begin(), epochs.end(),
                                [&](const WorkerEpoch& e) { return e.time < start; }),
                 epochs.end());
  }
  for (auto it = record->workers.begin(); it != record->workers.end();) {
    it = it->second.samples.empty() && it->second.epochs.empty() ? record->workers.erase(it)
                                                                 : std::next(it);
  }
}

// The earliest time of any timeline line, when no start line said.
double EarliestTime(const JobRecord& record) {
  double earliest = 0;
  auto see = [&](double time) {
    if (earliest == 0 || time < earliest) earliest = time;
  };
  for (const auto& [rank, worker] : record.workers) {
    for (const auto& sample : worker.samples) see(sample.time);
    for (const auto& epoch : worker.epochs) see(epoch.time - epoch.seconds);
  }
  for (const auto& event : record.events) see(event.time);
  for (const auto& checkpoint : record.checkpoints) see(checkpoint.started);
  return earliest;
}

}  // namespace

std::vector<HistoryEpoch> ParseHistory(const std::string& text, const std::string& source) {
  std::vector<HistoryEpoch> history;
  ForEachLine(text, source, [&](const JsonValue& line, const std::string& where) {
    HistoryEpoch epoch;
    epoch.epoch = Epoch(line, where);
    epoch.seconds = NumberOr(line, "seconds", where, 0);
    for (const auto& [name, value] : line.AsObject()) {
      if (name == "health") {
        ReadHealth(value, where, &epoch);
      } else if (value.type() == JsonValue::Type::kNumber && name != "epoch" && name != "seconds") {
        epoch.figures[name] = value.AsNumber();
      }
    }
    history.push_back(std::move(epoch));
  });
  return history;
}

void ParseTimeline(const std::string& name, const std::string& text, const std::string& source,
                   JobRecord* record) {
  const int rank = WorkerRank(name);
  LineHandler handle;
  if (rank >= 0) {
    handle = [&](const JsonValue& line, const std::string& where) {
      ReadWorkerLine(line, where, &record->workers[rank]);
    };
  } else if (name == "scheduler.jsonl") {
    handle = [&](const JsonValue& line, const std::string& where) {
      ReadSchedulerLine(line, where, record);
    };
  } else if (name == "launch.jsonl") {
    handle = [&](const JsonValue& line, const std::string& where) {
      ReadLaunchLine(line, where, record);
    };
  } else {
    throw MakeError(source,
                    ": not a timeline file (worker-<rank>.jsonl, scheduler.jsonl or "
                    "launch.jsonl)");
  }
  ForEachLine(text, source, handle);
}

JobRecord ReadJobRecord(const std::string& model_dir) {
  JobRecord record;
  record.model_dir = model_dir;
  const std::unique_ptr<Storage> storage = OpenStorage(model_dir);
  bool found = false;
  auto read = [&](const std::string& key, std::string* text) {
    try {
      *text = GetAtMost(*storage, key, kMaxFileBytes, "a job's " + key);
    } catch (const NotFoundError&) {
      return false;
    }
    found = true;
    return true;
  };
  // Files are named in errors as the user named the folder.
  auto name = [&](const std::string& key) {
    return IsStorageUri(model_dir) ? storage->UriOf(key) : model_dir + "/" + key;
  };
  std::string text;
  if (read("model.json", &text)) ReadModelJson(text, name("model.json"), &record);
  if (read("metrics.json", &text)) ReadMetricsJson(text, name("metrics.json"), &record);
  if (read("history.jsonl", &text)) record.history = ParseHistory(text, name("history.jsonl"));
  for (const ObjectInfo& object : storage->List("timeline/")) {
    const std::string file = object.key.substr(std::string("timeline/").size());
    if (file.find('/') != std::string::npos || file.size() < 6 ||
        file.compare(file.size() - 6, 6, ".jsonl") != 0) {
      continue;  // not a timeline file (a temporary file, a subfolder)
    }
    if (read(object.key, &text)) ParseTimeline(file, text, name(object.key), &record);
  }
  if (!found) {
    throw MakeError(model_dir,
                    ": no model.json, metrics.json, history.jsonl or timeline/ (is it "
                    "a training job's --model_dir?)");
  }
  record.start_time = StartTime(record);
  DropEarlierJobs(&record);
  if (record.start_time == 0) record.start_time = EarliestTime(record);
  std::sort(record.events.begin(), record.events.end(),
            [](const JobEvent& a, const JobEvent& b) { return a.time < b.time; });
  return record;
}

}  // namespace keel
