// PreparedBatch: a minibatch with its key set, ready for pulls and compute.
//
// PrepareKeys makes one from a Batch: the features' keys mixed, sorted and
// unique, the position of every non-zero among them, and each key's
// non-zeros in ascending order. BatchStream prepares them ahead of compute,
// the batch cache stores and reads them back, scoring and evaluation
// prepare their own.
#ifndef KEEL_WORKER_PREPARED_BATCH_H_
#define KEEL_WORKER_PREPARED_BATCH_H_

#include <cstdint>
#include <vector>

#include "io/batch.h"
#include "kv/keys.h"
#include "kv/shared_array.h"

namespace keel {

struct PreparedBatch {
  Batch batch;
  SharedArray<const Key> keys;      // the batch's features, mixed, sorted, unique
  std::vector<uint32_t> positions;  // per non-zero: its feature's index in `keys`
  // The non-zeros of each key in ascending order: those of keys[u] are
  // nonzeros_by_key[key_offsets[u] .. key_offsets[u + 1]). Backends reduce
  // gradients per key in this fixed order, however many threads made them.
  std::vector<uint32_t> key_offsets;
  std::vector<uint32_t> nonzeros_by_key;
};

// Fills `keys`, `positions`, `key_offsets` and `nonzeros_by_key` of a batch
// from its indices.
void PrepareKeys(PreparedBatch* prepared);

}  // namespace keel

#endif  // KEEL_WORKER_PREPARED_BATCH_H_
