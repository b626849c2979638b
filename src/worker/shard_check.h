// CheckShard: a worker's pass over its share of the training channel before
// the first minibatch, so that a bad label (or any bad record) fails the job
// before any weight has moved, not an epoch into it.
#ifndef KEEL_WORKER_SHARD_CHECK_H_
#define KEEL_WORKER_SHARD_CHECK_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "io/batch.h"
#include "io/input_split.h"
#include "io/readers.h"

namespace keel {

// The rows a check read (CheckShard), split by split, in the order a reader
// of each split gives them, in chunks of a few thousand rows.
struct CheckedRows {
  // The splits and reader options read, as the batch cache keys them
  // (BatchCacheKey, with a batch size of 0).
  uint64_t key = 0;
  std::vector<std::vector<Batch>> chunks;  // per split
  std::vector<uint64_t> bytes_read;        // per split, as its reader counts them
  uint64_t held_bytes = 0;                 // the memory the chunks take
  // Per split, or empty: the open reader of a stream whose first rows alone
  // are in its chunks (a pipe's statistics sample, HoldStreamHead), read on
  // after them; its bytes_read counts the chunks' bytes too.
  std::vector<std::unique_ptr<ExampleReader>> rest;

  bool empty() const { return chunks.empty(); }
  // Whether these are the rows of exactly `splits` (the same files, ranges
  // and versions, in the same order) read with `reader`'s options.
  bool Holds(const std::vector<InputSplit>& splits, const ReaderOptions& reader) const;
  void Clear() { *this = CheckedRows(); }
};

// Reads every record of `splits` with `reader` (its label rule, feature_dim
// and skip_bad_records as training reads them) and returns how many rows it
// read. Throws the reader's Error for the first bad record ("PATH:LINE: ..."),
// unless reader.skip_bad_records. Pipes are not read (a pipe is read once):
// their splits are skipped. A text split of known size is read in pieces of
// at least `min_piece_bytes` on up to `threads` threads (0: the machine's cores,
// at most 4): the check is the whole of a worker's start-up work on large
// data, with the cores otherwise idle then.
//
// With `keep`, the rows read are also kept there, for the first epoch to train
// on instead of parsing the text again; unless they would take more than
// `keep_max_bytes` of memory, or a split is a pipe: then *keep is left empty.
uint64_t CheckShard(const std::vector<InputSplit>& splits, const ReaderOptions& reader,
                    int threads = 0, uint64_t min_piece_bytes = uint64_t{8} << 20,
                    CheckedRows* keep = nullptr, uint64_t keep_max_bytes = 0);

// Reads the first `rows` rows of a stream (`split`, a pipe, read once) into
// `held` (its one chunk), leaving the stream open in held->rest for the
// first epoch to read on after them: a sample taken without losing the rows
// it read. Returns the rows read. Throws the reader's Error.
uint64_t HoldStreamHead(const InputSplit& split, const ReaderOptions& reader, uint64_t rows,
                        CheckedRows* held);

}  // namespace keel

#endif  // KEEL_WORKER_SHARD_CHECK_H_
