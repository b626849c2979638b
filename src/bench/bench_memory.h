// `keel bench kv --mode=memory`: the bytes a server's table holds per key, for
// each optimizer and row width, beside the bound (the key, the weights and the
// optimizer's state), so a reader can size servers and see the table's
// overhead.
#ifndef KEEL_BENCH_BENCH_MEMORY_H_
#define KEEL_BENCH_BENCH_MEMORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/bench_options.h"

namespace keel {

struct TableMemory {
  std::string optimizer;
  int width = 0;        // weights per row
  int state_width = 0;  // the optimizer's floats per row
  uint64_t keys = 0;
  double table_bytes_per_key = 0;     // what the table holds (ParameterTable::memory_bytes)
  double resident_bytes_per_key = 0;  // the process's resident growth while it filled
  double bound_bytes_per_key = 0;     // the key and the row's floats

  // The table's bytes over the bound.
  double overhead() const { return table_bytes_per_key / bound_bytes_per_key; }
};

// Fills a server's table (ParameterTable with the optimizer's state, through
// the push path a server takes) with `keys` distinct mixed keys, for each
// optimizer and each of `widths`, and measures it. Throws Error on a bad
// width.
std::vector<TableMemory> MeasureTableMemory(uint64_t keys, const std::vector<int>& widths);

// `keel bench kv --mode=memory`: MeasureTableMemory with `options`' keys and
// widths, printed as a table and a JSON line.
int BenchTableMemory(const BenchMemoryOptions& options);

}  // namespace keel

#endif  // KEEL_BENCH_BENCH_MEMORY_H_
