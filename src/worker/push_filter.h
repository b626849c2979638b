// PushFilter: the Parameter Server paper's significantly-modified filter for
// a worker's sparse pushes. A row (a key's `width` gradient values) whose
// change is small stays on the worker as a remainder instead of travelling;
// the key's next gradient is added to it, and the sum goes once one of its
// values reaches the threshold in magnitude, or at a flush.
//
// "Change" is the gradient sum: it is what the servers' optimizer is given,
// and, with plain SGD, the weight's change over the learning rate. Nothing
// is dropped: what a flush leaves behind is empty, and the rows pushed since
// the filter began add up to the gradients given to it (up to float
// rounding). An optimizer whose step is not linear in the gradient (AdaGrad,
// FTRL) sees one summed gradient where it would have seen several small
// ones; that changes its accumulators, which is why the threshold's default
// is off and its effect on AUC is measured (docs/BENCHMARKS.md).
//
// Memory is bounded: at most `max_rows` remainders are kept (each its key,
// its width's floats and a hash slot, about 40 + 4 x width bytes); a row
// below the threshold that would be a new remainder past that bound is sent
// as it is.
//
// Key caching (KVWorker::SetKeyCache) names a pull's key list when a push
// has exactly its keys; a filtered push has fewer keys, which travel. With
// `whole_share` below 1, a minibatch of which more than that share of rows
// would be sent is sent whole (every row, its remainder added and cleared),
// so that its push names the pull's list: sending a subset only pays when
// the keys it carries cost less than the values it leaves out.
//
// Not synchronized: one thread (the MinibatchPipeline's) uses it.
#ifndef KEEL_WORKER_PUSH_FILTER_H_
#define KEEL_WORKER_PUSH_FILTER_H_

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kv/keys.h"
#include "kv/shared_array.h"

namespace keel {

struct PushFilterOptions {
  // A row goes when one of its values (its remainder added) is at least this
  // in magnitude. 0: every row goes (the filter is off).
  float threshold = 0;
  // Remainders kept at most (see above).
  size_t max_rows = size_t{1} << 20;
  // A minibatch of which more than this share of rows would go is sent whole
  // (1: never; see above).
  double whole_share = 1;
};

// The share of a minibatch's rows above which sending a subset (keys and
// values) takes more bytes than sending every row's values under a key list
// the server keeps: value_bytes / (key_bytes + value_bytes) for a row of
// `width` values of `bytes_per_value` bytes and a key of 8 bytes.
double WholeShareWithKeyCache(int width, size_t bytes_per_value);

class PushFilter {
 public:
  // Throws Error if options.threshold is negative or not finite, or width or
  // max_rows is 0.
  PushFilter(const PushFilterOptions& options, int width);

  // True if the threshold is above 0: rows are held back.
  bool enabled() const { return options_.threshold > 0; }

  // A minibatch's push: `gradients` (keys.size() x width, row-major) of
  // sorted, unique `keys`. Adds each key's remainder to its row; the rows
  // that go (see above) are written to `*sent_keys` and `*sent_values`
  // (replacing what they held) and lose their remainder, the others become
  // (or stay) remainders. Returns true if every row went (the minibatch was
  // sent whole: `*sent_keys` is `keys`). Off, every row goes as it is.
  // Throws Error if gradients.size() is not keys.size() x width.
  bool Filter(const SharedArray<const Key>& keys, const std::vector<float>& gradients,
              std::vector<Key>* sent_keys, std::vector<float>* sent_values);

  // Every remainder, by key (sorted), into `*keys` and `*values` (replacing
  // what they held), and forgets them: after it nothing is held back.
  void Flush(std::vector<Key>* keys, std::vector<float>* values);

  // Flush into rows already made: merges every remainder into `*keys` and
  // `*values` (sorted keys none of which holds a remainder, as Filter's
  // output), in key order, and forgets them. Throws Error if a key of `*keys`
  // holds a remainder.
  void FlushInto(std::vector<Key>* keys, std::vector<float>* values);

  // Remainders held now.
  size_t remainder_rows() const { return slots_.size(); }
  // Rows given to Filter, and those of them it sent there (not at a flush).
  uint64_t rows_given() const { return rows_given_; }
  uint64_t rows_sent() const { return rows_sent_; }

 private:
  // True if a value of the `width_` floats at `row` is at least the threshold
  // in magnitude.
  bool Passes(const float* row) const;
  // Forgets `key`'s remainder, in `row` of values_ (which is reused).
  void Release(Key key, uint32_t row);

  const PushFilterOptions options_;
  const size_t width_;
  std::unordered_map<Key, uint32_t> slots_;  // key -> its remainder's row in values_
  std::vector<float> values_;                // rows of width_ floats
  std::vector<uint32_t> free_rows_;          // rows of values_ no key holds
  std::vector<float> row_;                   // a row being summed
  uint64_t rows_given_ = 0;
  uint64_t rows_sent_ = 0;
};

}  // namespace keel

#endif  // KEEL_WORKER_PUSH_FILTER_H_
