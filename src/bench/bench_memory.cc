#include "bench/bench_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>

#include "base/error.h"
#include "base/json.h"
#include "kv/keys.h"
#include "kv/optimizer.h"
#include "kv/parameter_table.h"

namespace keel {
namespace {

// The process's resident bytes (/proc/self/statm), or 0 where unknown.
uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

TableMemory Measure(const std::string& name, int width, uint64_t keys) {
  OptimizerOptions options;
  options.name = name;
  options.learning_rate = 1e-6f;  // the values do not matter here
  std::unique_ptr<Optimizer> optimizer = MakeOptimizer(options);
  TableMemory out;
  out.optimizer = name;
  out.width = width;
  out.state_width = optimizer->StateWidth(width);
  out.keys = keys;
  out.bound_bytes_per_key =
      static_cast<double>(sizeof(Key) + sizeof(float) * static_cast<size_t>(width + out.state_width));
  const uint64_t resident_before = ResidentBytes();
  uint64_t table_bytes = 0, resident_after = 0;
  {
    ParameterTable table(width, out.state_width);
    // Pushes of 10^4 sorted keys each, as workers send them.
    constexpr uint64_t kPerPush = 10000;
    std::vector<Key> batch;
    std::vector<float> gradients;
    std::mt19937 random(5);
    std::uniform_real_distribution<float> gradient(-1.0f, 1.0f);
    for (uint64_t begin = 0; begin < keys; begin += kPerPush) {
      const uint64_t n = std::min(kPerPush, keys - begin);
      batch.resize(n);
      for (uint64_t i = 0; i < n; ++i) batch[i] = MixKey(begin + i);
      std::sort(batch.begin(), batch.end());
      gradients.resize(n * static_cast<size_t>(width));
      for (float& g : gradients) g = gradient(random);
      table.Push(batch.data(), n, gradients.data(), optimizer.get(), 1.0f);
    }
    if (table.size() != keys) {
      throw MakeError("bench kv --mode=memory: the table holds ", table.size(), " rows of ", keys,
                      " keys pushed");
    }
    table_bytes = table.memory_bytes();
    resident_after = ResidentBytes();
  }
  out.table_bytes_per_key = static_cast<double>(table_bytes) / static_cast<double>(keys);
  out.resident_bytes_per_key =
      resident_after > resident_before
          ? static_cast<double>(resident_after - resident_before) / static_cast<double>(keys)
          : 0;
  return out;
}

}  // namespace

std::vector<TableMemory> MeasureTableMemory(uint64_t keys, const std::vector<int>& widths) {
  std::vector<TableMemory> rows;
  for (const char* name : {"sgd", "adagrad", "rmsprop", "adam", "ftrl"}) {
    for (int width : widths) {
      if (width < 1) throw MakeError("bench kv --mode=memory: row width ", width, " is not positive");
      rows.push_back(Measure(name, width, keys));
    }
  }
  return rows;
}

int BenchTableMemory(const BenchMemoryOptions& options) {
  const uint64_t keys = options.memory_keys;
  const std::vector<TableMemory> rows = MeasureTableMemory(keys, options.sparse_widths);
  std::printf("server table memory: %llu distinct keys pushed per table\n",
              static_cast<unsigned long long>(keys));
  std::printf("%-8s %5s %5s %12s %12s %12s %9s\n", "optimizer", "width", "state", "bound B/key",
              "table B/key", "resident", "x bound");
  std::vector<std::string> tables;
  for (const TableMemory& row : rows) {
    std::printf("%-9s %5d %5d %12.1f %12.1f %12.1f %8.2fx\n", row.optimizer.c_str(), row.width,
                row.state_width, row.bound_bytes_per_key, row.table_bytes_per_key,
                row.resident_bytes_per_key, row.overhead());
    tables.push_back(
        JsonObject(JsonObject::Style::kCompact)
            .String("optimizer", row.optimizer)
            .Integer("width", row.width)
            .Integer("state_width", row.state_width)
            .Number("bound_bytes_per_key", row.bound_bytes_per_key, kFigureDigits)
            .Number("table_bytes_per_key", row.table_bytes_per_key, kFigureDigits)
            .Number("resident_bytes_per_key", row.resident_bytes_per_key, kFigureDigits)
            .Close());
  }
  const std::string json = JsonObject(JsonObject::Style::kCompact)
                               .String("bench", "kv_memory")
                               .Count("keys", keys)
                               .Add("tables", JsonArray(tables, JsonObject::Style::kCompact))
                               .Close();
  std::printf(
      "(bound: the key and the row's floats; table: the slots the table holds, "
      "ParameterTable::memory_bytes; resident: the process's growth while it filled)\n%s\n",
      json.c_str());
  return 0;
}

}  // namespace keel
