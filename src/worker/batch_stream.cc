#include "worker/batch_stream.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "worker/batch_cache.h"
#include "worker/shard_check.h"

namespace keel {

BatchStream::BatchStream(std::vector<InputSplit> splits, const ReaderOptions& options,
                         size_t batch_size, size_t prefetch, const DataScaler* scaler,
                         BatchCache* cache, CheckedRows* held)
    : splits_(std::move(splits)),
      options_(options),
      batch_size_(batch_size),
      prefetch_(std::max<size_t>(1, prefetch)),
      scaler_(scaler),
      cache_(cache),
      held_(held != nullptr && held->Holds(splits_, options_) ? held : nullptr) {
  thread_ = std::thread([this] { Produce(); });
}

BatchStream::~BatchStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

namespace {

// A scaling that centres more features than this may add as many entries to
// every row (all of them with unbias_data=true on sparse rows): its batches
// are cached as read, and scaled as they are read back. Under the automatic
// centring a feature is centred only if it is in half the rows, so a sparse
// row gains at most about twice its own entries.
constexpr size_t kCachedScaledCentredMax = 256;

}  // namespace

bool BatchStream::CachesScaled() const {
  return scaler_ != nullptr && scaler_->centred_features() <= kCachedScaledCentredMax;
}

void BatchStream::Prepare(PreparedBatch* pending, bool keys_prepared) const {
  // Scaling may drop zeros and add centred features: keys after it.
  if (scaler_ != nullptr && scaler_->Apply(&pending->batch)) keys_prepared = false;
  if (!keys_prepared) PrepareKeys(pending);
}

bool BatchStream::Deliver(PreparedBatch* pending) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return stopping_ || ready_.size() < prefetch_; });
  if (stopping_) return false;
  ready_.push_back(std::move(*pending));
  *pending = PreparedBatch();
  changed_.notify_all();
  return true;
}

void BatchStream::Produce() {
  try {
    std::unique_ptr<BatchCacheWriter> writer;
    if (cache_ != nullptr) {
      const uint64_t key = BatchCacheKey(splits_, options_, batch_size_);
      // The file's batches scaled as this stream scales (CachesScaled) are
      // delivered as they are; batches as read are scaled on the way;
      // others are read from the text again, and the file written anew.
      const uint64_t scaling = CachesScaled() ? scaler_->fingerprint() : 0;
      std::unique_ptr<BatchCacheReader> reader = cache_->OpenReader(key);
      if (reader && reader->scaling() != scaling) {
        reader.reset();
        cache_->Discard();
      }
      if (reader) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          from_cache_ = true;
          skipped_ = reader->skipped_records();
          bytes_ = reader->bytes_read();
        }
        PreparedBatch pending;
        while (reader->Next(&pending)) {
          if (scaling == 0) Prepare(&pending, /*keys_prepared=*/true);
          if (!Deliver(&pending)) return;
        }
      } else {
        writer = cache_->OpenWriter(key, scaling);
        ProduceFromText(writer.get());
      }
    } else {
      ProduceFromText(nullptr);
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = true;
  changed_.notify_all();
}

void BatchStream::ProduceFromText(BatchCacheWriter* writer) {
  PreparedBatch pending;
  bool caching = writer != nullptr;
  // The cache holds each batch as it is delivered (scaled, with its keys),
  // or, when it does not cache scaled batches, as read (with the keys of its
  // entries as read, valid while scaling leaves them alone).
  const bool scaled = CachesScaled();
  const auto deliver = [&]() {
    bool keys_prepared = false;
    if (caching && !scaled) {
      PrepareKeys(&pending);
      keys_prepared = true;
      caching = writer->Append(pending);
    }
    Prepare(&pending, keys_prepared);
    if (caching && scaled) caching = writer->Append(pending);
    return Deliver(&pending);
  };
  for (size_t s = 0; s < splits_.size(); ++s) {
    std::unique_ptr<ExampleReader> reader;
    if (held_ != nullptr) {
      // The rows as the check read them, in chunks cut where its reads
      // stopped: cut again into minibatches, each chunk freed once taken.
      for (Batch& chunk : held_->chunks[s]) {
        for (size_t row = 0; row < chunk.rows();) {
          const size_t take = std::min(batch_size_ - pending.batch.rows(), chunk.rows() - row);
          pending.batch.AppendRows(chunk, row, take);
          row += take;
          if (pending.batch.rows() == batch_size_ && !deliver()) return;
        }
        chunk = Batch();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        bytes_ += held_->bytes_read[s];
      }
      // A stream whose head alone is held goes on from where it stopped.
      if (s >= held_->rest.size() || held_->rest[s] == nullptr) continue;
      reader = std::move(held_->rest[s]);
    } else {
      reader = OpenReader(splits_[s], options_);
    }
    while (true) {
      const size_t want = batch_size_ - pending.batch.rows();
      const size_t got = reader->Read(want, &pending.batch);
      if (pending.batch.rows() == batch_size_ && !deliver()) return;
      if (got == 0) break;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    skipped_ += reader->skipped_records();
    bytes_ += reader->bytes_read();
  }
  if (pending.batch.rows() > 0 && !deliver()) return;
  if (caching && writer->Seal(skipped_records(), bytes_read())) {
    std::lock_guard<std::mutex> lock(mutex_);
    sealed_ = true;
  }
}

void BatchStream::Select(uint64_t first, int part, int parts) {
  selection_.first = first;
  selection_.part = static_cast<uint64_t>(part);
  selection_.parts = static_cast<uint64_t>(std::max(parts, 1));
}

bool BatchStream::Next(PreparedBatch* out) {
  while (Take(out)) {
    const uint64_t index = taken_++;
    const Selection& chosen = selection_;
    if (index >= chosen.first && (index - chosen.first) % chosen.parts == chosen.part) return true;
  }
  return false;
}

bool BatchStream::Take(PreparedBatch* out) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty() || done_; });
  if (!ready_.empty()) {
    *out = std::move(ready_.front());
    ready_.pop_front();
    changed_.notify_all();
    return true;
  }
  if (error_) std::rethrow_exception(error_);
  return false;
}

uint64_t BatchStream::skipped_records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return skipped_;
}

bool BatchStream::from_cache() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return from_cache_;
}

bool BatchStream::cached() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return from_cache_ || sealed_;
}

uint64_t BatchStream::bytes_read() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

}  // namespace keel
