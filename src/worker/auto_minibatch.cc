#include "worker/auto_minibatch.h"

#include <algorithm>

#include "io/batch.h"
#include "io/input_split.h"
#include "io/readers.h"

namespace keel {
namespace {

// Minibatches an epoch that auto aims at, at least, on each worker.
constexpr uint64_t kStepsPerEpoch = 40;

}  // namespace

int AutoMinibatchSize(uint64_t rows, int workers) {
  const uint64_t share = rows / static_cast<uint64_t>(std::max(workers, 1));
  return static_cast<int>(std::clamp<uint64_t>(share / kStepsPerEpoch, kAutoMinibatchLeast,
                                               kAutoMinibatchMost));
}

int AutoMinibatchSize(const std::string& channel, const ReaderOptions& reader, int workers) {
  if (IsPipeChannel(channel)) return kAutoMinibatchMost;
  // Past this many rows every answer is kAutoMinibatchMost.
  const uint64_t enough = kAutoMinibatchMost * kStepsPerEpoch * static_cast<uint64_t>(workers);
  uint64_t rows = 0;
  Batch batch;
  for (const InputSplit& split : ResolveChannel(channel, 0, 1)) {
    const auto split_reader = OpenReader(split, reader);
    while (rows < enough) {
      batch.Clear();
      const size_t got = split_reader->Read(std::min<uint64_t>(enough - rows, 4096), &batch);
      if (got == 0) break;
      rows += got;
    }
    if (rows >= enough) break;
  }
  return AutoMinibatchSize(rows, workers);
}

}  // namespace keel
