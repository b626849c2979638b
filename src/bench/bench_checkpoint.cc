// `keel bench checkpoint`: full against delta checkpoints of one server's
// table. A table of --checkpoint_keys rows (Adagrad, one weight) is filled
// through the push path, a full snapshot is taken, then each round pushes
// --changed_share of the keys and takes, side by side at the same point, a
// delta (the rows changed since the previous copy) and a full snapshot. Each
// is timed in its two parts: the copy (on a server's receive thread, where
// pushes wait) and the write (sort, encode, store: in the background), and
// its bytes are counted. Then both are read back the way a resume does: a piece at a
// time (SnapshotFileReader), never whole.
#include "bench/bench_checkpoint.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "base/time.h"
#include "io/checkpoint.h"
#include "kv/keys.h"
#include "server/shard.h"
#include "server/snapshot_writer.h"

namespace keel {
namespace {

struct Taken {
  uint64_t rows = 0;
  uint64_t bytes = 0;
  double copy_seconds = 0;
  double write_seconds = 0;
  double read_seconds = 0;
  // The process's peak resident bytes while the write went on, over its
  // resident bytes when it began (what writing the file held).
  double write_peak_megabytes = 0;
};

// Kilobytes of the /proc/self/status line `field` ("VmRSS", "VmHWM"); 0 where unknown.
uint64_t ProcessKilobytes(const char* field) {
  std::ifstream status("/proc/self/status");
  const std::string text((std::istreambuf_iterator<char>(status)),
                         std::istreambuf_iterator<char>());
  const size_t at = text.find(std::string("\n") + field + ":");
  return at == std::string::npos
             ? 0
             : std::strtoull(text.c_str() + at + strlen(field) + 2, nullptr, 10);
}

// Starts the peak (VmHWM) over from the current resident size.
void ResetPeakResident() { std::ofstream("/proc/self/clear_refs") << "5"; }

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

// Pushes gradients to `keys` (sorted) in pushes of 10^4 keys.
void PushAll(const std::vector<Key>& keys, ServerTable* table, std::mt19937* random) {
  constexpr size_t kPerPush = 10000;
  std::uniform_real_distribution<float> gradient(-1.0f, 1.0f);
  std::vector<float> gradients(kPerPush);
  for (size_t begin = 0; begin < keys.size(); begin += kPerPush) {
    const size_t n = std::min(kPerPush, keys.size() - begin);
    for (size_t i = 0; i < n; ++i) gradients[i] = gradient(*random);
    table->rows->Push(keys.data() + begin, n, gradients.data(), table->optimizer.get());
  }
}

// Copies `table` (all rows, or those changed since its last copy) as a
// server does at SNAPSHOT, writes it as checkpoint `id` through the server's
// SnapshotWriter, and reads it back.
Taken Take(ServerTable* table, bool delta, const std::string& uri, const std::string& id) {
  Taken taken;
  const double copy_begin = MonotonicSeconds();
  ServerSnapshot snapshot;
  snapshot.delta = delta;
  snapshot.spans.emplace_back(0, ~Key{0});
  SnapshotTable copy;
  AppendRows(*table, &copy, delta);
  snapshot.tables.push_back(std::move(copy));
  taken.copy_seconds = MonotonicSeconds() - copy_begin;
  taken.rows = snapshot.tables[0].keys.size();
  proto::CheckpointFile written;
  std::string error;
  ResetPeakResident();
  const uint64_t resident_before = ProcessKilobytes("VmRSS");
  const double write_begin = MonotonicSeconds();
  {
    SnapshotWriter writer(
        [&](const std::string&, const proto::CheckpointFile& file, const std::string& why) {
          written = file;
          error = why;
        });
    writer.Write(uri, id, std::move(snapshot));
  }  // the destructor waits for the write
  taken.write_seconds = MonotonicSeconds() - write_begin;
  taken.write_peak_megabytes =
      (static_cast<double>(ProcessKilobytes("VmHWM")) - static_cast<double>(resident_before)) /
      1024;
  if (!error.empty()) throw MakeError("checkpoint ", id, " not written: ", error);
  taken.bytes = written.bytes();
  const double read_begin = MonotonicSeconds();
  CheckpointStore store(uri);
  const SnapshotFileReader read = store.OpenSnapshotFile(id, written);
  uint64_t rows_read = 0;
  read.ForEachChunk(0,
                    [&rows_read](const SnapshotTable& chunk) { rows_read += chunk.keys.size(); });
  taken.read_seconds = MonotonicSeconds() - read_begin;
  if (rows_read != taken.rows) {
    throw MakeError("checkpoint ", id, " read back ", rows_read, " rows of ", taken.rows);
  }
  return taken;
}

// After a tracked copy: rows changed from now on are told apart.
void MarkCopied(ServerTable* table) {
  table->copied_stamp = table->rows->stamp();
  table->rows->AdvanceStamp();
}

}  // namespace

ServerTable AdagradBenchTable() {
  OptimizerOptions options;
  options.name = "adagrad";
  options.learning_rate = 1e-3f;
  ServerTable table;
  table.optimizer = MakeOptimizer(options);
  table.rows = std::make_unique<ParameterTable>(1, table.optimizer->StateWidth(1));
  return table;
}

int BenchCheckpoint(const BenchCheckpointOptions& options) {
  std::string uri = options.checkpoint_uri;
  std::string scratch;
  if (uri.empty()) {
    char folder[] = "/tmp/keel-bench-ckpt-XXXXXX";
    if (!mkdtemp(folder)) throw MakeError("cannot create a folder under /tmp");
    scratch = folder;
    uri = "file://" + scratch;
  }
  ServerTable table = AdagradBenchTable();
  table.rows->EnableStamps();
  const uint64_t keys = options.checkpoint_keys;
  std::fprintf(stderr, "filling a table of %llu keys...\n", static_cast<unsigned long long>(keys));
  std::mt19937 random(7);
  {
    std::vector<Key> all(keys);
    for (uint64_t i = 0; i < keys; ++i) all[i] = MixKey(i);
    std::sort(all.begin(), all.end());
    PushAll(all, &table, &random);
  }
  int checkpoint = 0;
  auto next_id = [&] { return CheckpointId(1, static_cast<uint64_t>(++checkpoint)); };
  const Taken first = Take(&table, /*delta=*/false, uri, next_id());
  MarkCopied(&table);
  std::printf(
      "first full checkpoint: %llu rows, %llu bytes, copy %.3f s, write %.3f s, write peak "
      "+%.1f MB\n",
      static_cast<unsigned long long>(first.rows), static_cast<unsigned long long>(first.bytes),
      first.copy_seconds, first.write_seconds, first.write_peak_megabytes);
  std::vector<Taken> deltas, fulls;
  const uint64_t changed =
      std::max<uint64_t>(1, static_cast<uint64_t>(options.changed_share * keys));
  std::uniform_int_distribution<uint64_t> pick(0, keys - 1);
  for (int round = 0; round < options.rounds; ++round) {
    std::vector<Key> touched;
    touched.reserve(changed);
    while (touched.size() < changed) touched.push_back(MixKey(pick(random)));
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    PushAll(touched, &table, &random);
    // The same point, both ways: the delta first (the full copy does not
    // change what a delta would hold).
    deltas.push_back(Take(&table, /*delta=*/true, uri, next_id()));
    fulls.push_back(Take(&table, /*delta=*/false, uri, next_id()));
    MarkCopied(&table);
    if (deltas.back().rows != touched.size()) {
      throw MakeError("round ", round, ": the delta holds ", deltas.back().rows, " rows, ",
                      touched.size(), " changed");
    }
  }
  auto median = [](const std::vector<Taken>& takes, double Taken::*field) {
    std::vector<double> values;
    for (const Taken& taken : takes) values.push_back(taken.*field);
    return Median(values);
  };
  auto median_bytes = [](const std::vector<Taken>& takes) {
    std::vector<double> values;
    for (const Taken& taken : takes) values.push_back(static_cast<double>(taken.bytes));
    return Median(values);
  };
  std::printf("%llu keys, %.2f%% changed between checkpoints, median of %d rounds:\n",
              static_cast<unsigned long long>(keys), 100 * options.changed_share, options.rounds);
  std::printf("%-6s %12s %14s %10s %10s %10s\n", "kind", "rows", "bytes", "copy s", "write s",
              "read s");
  for (const auto& [name, takes] :
       {std::make_pair("full", &fulls), std::make_pair("delta", &deltas)}) {
    std::printf("%-6s %12llu %14.0f %10.4f %10.4f %10.4f\n", name,
                static_cast<unsigned long long>(takes->front().rows), median_bytes(*takes),
                median(*takes, &Taken::copy_seconds), median(*takes, &Taken::write_seconds),
                median(*takes, &Taken::read_seconds));
  }
  const std::string json = JsonObject()
                               .String("bench", "checkpoint")
                               .Count("keys", keys)
                               .Number("changed_share", options.changed_share, kFigureDigits)
                               .Fixed("full_bytes", median_bytes(fulls), 0)
                               .Fixed("delta_bytes", median_bytes(deltas), 0)
                               .Fixed("full_copy_s", median(fulls, &Taken::copy_seconds), 4)
                               .Fixed("delta_copy_s", median(deltas, &Taken::copy_seconds), 4)
                               .Fixed("full_write_s", median(fulls, &Taken::write_seconds), 4)
                               .Fixed("delta_write_s", median(deltas, &Taken::write_seconds), 4)
                               .Close();
  std::printf("%s\n", json.c_str());
  if (!scratch.empty()) std::filesystem::remove_all(scratch);
  return 0;
}

}  // namespace keel
