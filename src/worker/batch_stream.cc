#include "worker/batch_stream.h"

#include <algorithm>
#include <memory>

#include "worker/batch_cache.h"

namespace keel {

void PrepareKeys(PreparedBatch* prepared) {
  const auto& indices = prepared->batch.indices;
  std::vector<std::pair<Key, uint32_t>> mixed(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    mixed[i] = {MixKey(indices[i]), static_cast<uint32_t>(i)};
  }
  std::sort(mixed.begin(), mixed.end());
  std::vector<Key> keys;
  keys.reserve(mixed.size());
  prepared->positions.resize(indices.size());
  prepared->key_offsets.clear();
  prepared->nonzeros_by_key.resize(indices.size());
  // Sorted by (key, non-zero): each key's non-zeros come out in ascending order.
  for (size_t i = 0; i < mixed.size(); ++i) {
    const auto& [key, nonzero] = mixed[i];
    if (keys.empty() || keys.back() != key) {
      keys.push_back(key);
      prepared->key_offsets.push_back(static_cast<uint32_t>(i));
    }
    prepared->positions[nonzero] = static_cast<uint32_t>(keys.size() - 1);
    prepared->nonzeros_by_key[i] = nonzero;
  }
  prepared->key_offsets.push_back(static_cast<uint32_t>(mixed.size()));
  prepared->keys = SharedArray<const Key>(std::move(keys));
}

BatchStream::BatchStream(std::vector<InputSplit> splits, const ReaderOptions& options,
                         size_t batch_size, size_t prefetch, const DataScaler* scaler,
                         BatchCache* cache)
    : splits_(std::move(splits)),
      options_(options),
      batch_size_(batch_size),
      prefetch_(std::max<size_t>(1, prefetch)),
      scaler_(scaler),
      cache_(cache) {
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

bool BatchStream::Deliver(PreparedBatch* pending) {
  if (scaler_ != nullptr) scaler_->Apply(&pending->batch);
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
      if (std::unique_ptr<BatchCacheReader> reader = cache_->OpenReader(key)) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          from_cache_ = true;
          skipped_ = reader->skipped_records();
          bytes_ = reader->bytes_read();
        }
        PreparedBatch pending;
        while (reader->Next(&pending)) {
          if (!Deliver(&pending)) return;
        }
      } else {
        writer = cache_->OpenWriter(key);
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
  // Keys are prepared from the indices alone: the cache holds the batch as
  // read, scaled as it is delivered.
  const auto deliver = [&]() {
    PrepareKeys(&pending);
    if (caching) caching = writer->Append(pending);
    return Deliver(&pending);
  };
  for (const InputSplit& split : splits_) {
    auto reader = OpenReader(split, options_);
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

bool BatchStream::Next(PreparedBatch* out) {
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
