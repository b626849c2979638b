#include "worker/shard_check.h"

#include "io/batch.h"

namespace keel {

uint64_t CheckShard(const std::vector<InputSplit>& splits, const ReaderOptions& reader) {
  constexpr size_t kRowsPerRead = 4096;
  uint64_t rows = 0;
  Batch scratch;
  for (const InputSplit& split : splits) {
    if (split.is_pipe) continue;
    const auto split_reader = OpenReader(split, reader);
    while (true) {
      scratch.Clear();
      const size_t got = split_reader->Read(kRowsPerRead, &scratch);
      if (got == 0) break;
      rows += got;
    }
  }
  return rows;
}

}  // namespace keel
