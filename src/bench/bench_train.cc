#include "bench/bench_train.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <system_error>

#include "base/error.h"
#include "base/json.h"
#include "base/json_reader.h"
#include "base/time.h"

namespace keel {
namespace {

bool IsFolder(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

// `args` without --NAME and its value.
std::vector<std::string> Without(const std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--" + name || args[i] == "-" + name) {
      ++i;
      continue;
    }
    if (args[i].rfind("--" + name + "=", 0) == 0 || args[i].rfind("-" + name + "=", 0) == 0) {
      continue;
    }
    kept.push_back(args[i]);
  }
  return kept;
}

// Runs `argv` with its standard output on ours's standard error; its exit status.
int RunChild(const std::vector<std::string>& argv) {
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) throw MakeError("cannot start keel launch: fork failed");
  if (child == 0) {
    dup2(STDERR_FILENO, STDOUT_FILENO);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) throw MakeError("cannot wait for keel launch: ", std::strerror(errno));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct EpochShare {
  int epoch = 0, rank = 0;
  double end = 0;  // Unix seconds
  double examples = 0, seconds = 0;
  double read = 0, pull = 0, compute = 0, push = 0;
  // Data messages to and from the servers in the epoch's training (Meta and
  // frames; see KVWorker::wire_bytes_sent).
  double bytes_sent = 0, bytes_received = 0;
};

double Number(const JsonValue& event, const char* name) {
  const JsonValue* value = event.Find(name);
  return value != nullptr && value->type() == JsonValue::Type::kNumber ? value->AsNumber() : 0;
}

// Every worker's "epoch" events in `model_dir`/timeline.
std::vector<EpochShare> ReadEpochs(const std::string& model_dir, int workers) {
  std::vector<EpochShare> epochs;
  for (int rank = 0; rank < workers; ++rank) {
    const std::string path = model_dir + "/timeline/worker-" + std::to_string(rank) + ".jsonl";
    std::ifstream in(path);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      const JsonValue event = ParseJson(line, path + ":" + std::to_string(number));
      const JsonValue* name = event.Find("event");
      if (name == nullptr || name->type() != JsonValue::Type::kString ||
          name->AsString() != "epoch") {
        continue;
      }
      EpochShare share;
      share.epoch = static_cast<int>(Number(event, "epoch"));
      share.rank = rank;
      share.end = Number(event, "time");
      share.examples = Number(event, "examples");
      share.seconds = Number(event, "seconds");
      share.read = Number(event, "read_wait_seconds");
      share.pull = Number(event, "pull_wait_seconds");
      share.compute = Number(event, "compute_seconds");
      share.push = Number(event, "push_seconds");
      share.bytes_sent = Number(event, "wire_bytes_sent");
      share.bytes_received = Number(event, "wire_bytes_received");
      epochs.push_back(share);
    }
  }
  std::sort(epochs.begin(), epochs.end(), [](const EpochShare& a, const EpochShare& b) {
    return std::make_pair(a.epoch, a.rank) < std::make_pair(b.epoch, b.rank);
  });
  return epochs;
}

double Percent(double part, double whole) { return whole > 0 ? 100 * part / whole : 0; }

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int BenchTrain(const BenchTrainOptions& options) {
  const std::string& data = options.data;
  std::vector<std::string> launch = {options.keel, "launch"};
  std::vector<std::string> rest = Without(options.args, "data");
  // The options (the flags as parsed, a --flagfile's included) say what the
  // launch will do; --servers and --workers default to 1 (the flags' own
  // defaults).
  const int workers = std::max(1, options.workers);
  const bool datagen_layout = IsFolder(data + "/train");
  launch.push_back("--train=" + (datagen_layout ? data + "/train" : data));
  if (options.validation.empty() && datagen_layout && IsFolder(data + "/validation")) {
    launch.push_back("--validation=" + data + "/validation");
  }
  std::string model_dir = options.model_dir;
  std::string temporary;
  if (model_dir.empty()) {
    char folder[] = "/tmp/keel-bench-train-XXXXXX";
    if (!mkdtemp(folder)) throw MakeError("cannot create a folder under /tmp");
    temporary = model_dir = folder;
    launch.push_back("--model_dir=" + model_dir);
  }
  launch.insert(launch.end(), rest.begin(), rest.end());

  const double started = WallSeconds();
  const int status = RunChild(launch);
  const double wall = WallSeconds() - started;
  const std::vector<EpochShare> epochs = ReadEpochs(model_dir, workers);
  if (!temporary.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(temporary, ignored);
  }
  if (status != 0) throw MakeError("keel bench train: the job failed (exit status ", status, ")");
  if (epochs.empty()) throw MakeError("keel bench train: the workers recorded no epoch");

  double first_minibatch = 1e300;
  for (const EpochShare& share : epochs) {
    first_minibatch = std::min(first_minibatch, share.end - share.seconds - started);
  }
  std::printf("keel bench train: %s, %d worker(s); launch to exit %.2f s, launch to the first "
              "minibatch %.2f s\n",
              data.c_str(), workers, wall, first_minibatch);
  std::printf("%5s %6s %10s %8s %12s %7s %7s %8s %7s %7s\n", "epoch", "worker", "examples",
              "seconds", "examples/s", "data", "rows", "compute", "push", "other");
  std::vector<double> later_rates;
  std::map<std::string, double> later;  // stage seconds summed over epochs after the first
  // Wire bytes and examples, over every epoch and over those after the first.
  double all_bytes = 0, all_examples = 0, later_bytes = 0, later_examples = 0;
  for (const EpochShare& e : epochs) {
    all_bytes += e.bytes_sent + e.bytes_received;
    all_examples += e.examples;
    if (e.epoch > 1) {
      later_bytes += e.bytes_sent + e.bytes_received;
      later_examples += e.examples;
    }
    const double other = std::max(0.0, e.seconds - e.read - e.pull - e.compute - e.push);
    const double rate = e.seconds > 0 ? e.examples / e.seconds : 0;
    std::printf("%5d %6d %10.0f %8.3f %12.0f %6.1f%% %6.1f%% %7.1f%% %6.1f%% %6.1f%%\n", e.epoch,
                e.rank, e.examples, e.seconds, rate, Percent(e.read, e.seconds),
                Percent(e.pull, e.seconds), Percent(e.compute, e.seconds),
                Percent(e.push, e.seconds), Percent(other, e.seconds));
    if (e.epoch > 1) {
      later_rates.push_back(rate);
      later["seconds"] += e.seconds;
      later["data"] += e.read;
      later["rows"] += e.pull;
      later["compute"] += e.compute;
      later["push"] += e.push;
      later["other"] += other;
    }
  }
  const double median = Median(later_rates);
  if (!later_rates.empty()) {
    std::printf("after the first epoch: median %.0f examples/s per worker; time shares: data "
                "%.1f%%, rows %.1f%%, compute %.1f%%, push %.1f%%, other %.1f%%\n",
                median, Percent(later["data"], later["seconds"]),
                Percent(later["rows"], later["seconds"]),
                Percent(later["compute"], later["seconds"]),
                Percent(later["push"], later["seconds"]), Percent(later["other"], later["seconds"]));
  }
  const double bytes_per_example = all_examples > 0 ? all_bytes / all_examples : 0;
  const double later_bytes_per_example = later_examples > 0 ? later_bytes / later_examples : 0;
  std::printf("bytes on the wire per example trained (the workers' data messages to and from "
              "the servers, Meta and frames, sent and received): %.1f over every epoch",
              bytes_per_example);
  if (later_examples > 0) std::printf(", %.1f after the first", later_bytes_per_example);
  std::printf("\n");
  constexpr auto kCompact = JsonObject::Style::kCompact;
  JsonObject shares(kCompact);
  for (const char* part : {"data", "rows", "compute", "push", "other"}) {
    shares.Fixed(part, Percent(later[part], later["seconds"]) / 100, 4);
  }
  const std::string json =
      JsonObject(kCompact)
          .String("bench", "train")
          .Integer("workers", workers)
          .Fixed("wall_seconds", wall, 3)
          .Fixed("wire_bytes_per_example", bytes_per_example, 1)
          .Fixed("wire_bytes_per_example_after_first_epoch", later_bytes_per_example, 1)
          .Fixed("first_minibatch_seconds", first_minibatch, 3)
          .Fixed("examples_per_s_after_first_epoch", median, 0)
          .Add("shares", shares.Close())
          .Close();
  std::printf("%s\n", json.c_str());
  return 0;
}

}  // namespace keel
