// CheckShard: a worker's pass over its share of the training channel before
// the first minibatch, so that a bad label (or any bad record) fails the job
// before any weight has moved, not an epoch into it.
#ifndef KEEL_WORKER_SHARD_CHECK_H_
#define KEEL_WORKER_SHARD_CHECK_H_

#include <cstdint>
#include <vector>

#include "io/input_split.h"
#include "io/readers.h"

namespace keel {

// Reads every record of `splits` with `reader` (its label rule, feature_dim
// and skip_bad_records as training reads them) and returns how many rows it
// read. Throws the reader's Error for the first bad record ("PATH:LINE: ..."),
// unless reader.skip_bad_records. Pipes are not read (a pipe is read once):
// their splits are skipped. A text split of known size is read in pieces of
// at least `min_piece_bytes` on up to `threads` threads (0: the machine's cores,
// at most 4): the check is the whole of a worker's start-up work on large
// data, with the cores otherwise idle then.
uint64_t CheckShard(const std::vector<InputSplit>& splits, const ReaderOptions& reader,
                    int threads = 0, uint64_t min_piece_bytes = uint64_t{8} << 20);

}  // namespace keel

#endif  // KEEL_WORKER_SHARD_CHECK_H_
