// BatchStream: minibatches read and prepared ahead of compute.
//
// A background thread reads the splits in order, cuts them into minibatches
// and prepares each one's key set (feature indices mixed, sorted, unique) and
// the position of every non-zero in it, so the trainer can pull a batch's
// rows while it computes the one before.
#ifndef KEEL_WORKER_BATCH_STREAM_H_
#define KEEL_WORKER_BATCH_STREAM_H_

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "io/input_split.h"
#include "io/readers.h"
#include "worker/data_statistics.h"
#include "worker/prepared_batch.h"

namespace keel {

class BatchCache;        // worker/batch_cache.h
class BatchCacheWriter;  // worker/batch_cache.h
struct CheckedRows;      // worker/shard_check.h

class BatchStream {
 public:
  // Starts reading. `prefetch` batches are prepared ahead at most. A
  // `scaler` (which must outlive the stream) is applied to every batch as it
  // is prepared. With a `cache` (which must outlive the stream), the batches
  // come from its file when it holds these splits read and scaled this way
  // (as they were delivered, so neither scaled nor prepared again; batches as
  // read when the scaler centres many features), and are
  // written to it otherwise (the file is kept only if the stream reads to the
  // end). With `held` (which must outlive the stream), the rows the shard
  // check read, kept for these very splits and reader options
  // (CheckedRows::Holds), are taken from it, and its memory given back as
  // they are, instead of parsing the text again; a cache that holds the
  // splits still comes first.
  BatchStream(std::vector<InputSplit> splits, const ReaderOptions& options, size_t batch_size,
              size_t prefetch = 4, const DataScaler* scaler = nullptr, BatchCache* cache = nullptr,
              CheckedRows* held = nullptr);
  ~BatchStream();
  BatchStream(const BatchStream&) = delete;
  BatchStream& operator=(const BatchStream&) = delete;

  // The next batch; false at the end. Rethrows the reader's Error.
  bool Next(PreparedBatch* out);
  // From now on Next gives only part `part` of `parts` (0 <= part < parts)
  // of the batches from batch `first` on (batches counted from the stream's
  // first, 0), taken in turn: batches first + part, first + part + parts, ...
  // Call before the first Next.
  void Select(uint64_t first, int part, int parts);

  uint64_t skipped_records() const;
  uint64_t bytes_read() const;
  // Whether the batches come from the cache (known once Next has returned).
  bool from_cache() const;
  // Whether the cache holds these batches now (read from it, or written to it
  // and sealed; known once Next has returned false).
  bool cached() const;

 private:
  // The next batch read, selected or not; false at the end.
  bool Take(PreparedBatch* out);
  void Produce();
  // Whether the cache holds this stream's batches scaled (else as read).
  bool CachesScaled() const;
  // Scales `pending` (as read) and prepares its keys, unless they are
  // prepared (`keys_prepared`) for entries the scaling leaves as they are.
  void Prepare(PreparedBatch* pending, bool keys_prepared) const;
  // Hands `pending` (scaled, with its keys) to the consumer; false once the
  // stream is stopping.
  bool Deliver(PreparedBatch* pending);
  // Reads the splits' text; with a `writer`, writes each batch to it too.
  void ProduceFromText(BatchCacheWriter* writer);

  std::vector<InputSplit> splits_;
  ReaderOptions options_;
  size_t batch_size_;
  size_t prefetch_;
  const DataScaler* scaler_;
  BatchCache* cache_;
  CheckedRows* held_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<PreparedBatch> ready_;
  bool done_ = false;
  bool from_cache_ = false;
  bool sealed_ = false;
  bool stopping_ = false;
  std::exception_ptr error_;
  uint64_t skipped_ = 0;
  uint64_t bytes_ = 0;
  // What Next gives (Select), and how many batches it has taken.
  struct Selection {
    uint64_t first = 0, part = 0, parts = 1;
  } selection_;
  uint64_t taken_ = 0;
  std::thread thread_;
};

}  // namespace keel

#endif  // KEEL_WORKER_BATCH_STREAM_H_
