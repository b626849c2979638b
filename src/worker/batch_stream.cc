#include "worker/batch_stream.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "worker/batch_cache.h"
#include "worker/shard_check.h"

namespace keel {

namespace {

using MixedNonZero = std::pair<Key, uint32_t>;  // (MixKey(feature), non-zero)

// Buckets of a few pairs each this large at most are sorted by insertion.
constexpr uint32_t kInsertionSortMax = 32;

// The pairs of `indices`' mixed keys and positions in ascending order, as
// std::sort gives them, in about linear time: MixKey spreads keys evenly over
// 64 bits, so a scatter by their top bits into n/4 to n/2 buckets leaves a
// few pairs in each, sorted by insertion. A bucket that holds more (a common
// feature's many non-zeros beside another key) is sorted by std::sort, so no
// input takes more than n log n.
std::vector<MixedNonZero> SortedMixedKeys(const std::vector<uint64_t>& indices) {
  const size_t n = indices.size();
  std::vector<MixedNonZero> sorted(n);
  if (n < 512) {
    for (size_t i = 0; i < n; ++i) sorted[i] = {MixKey(indices[i]), static_cast<uint32_t>(i)};
    std::sort(sorted.begin(), sorted.end());
    return sorted;
  }
  int bits = 8;
  while (bits < 20 && (size_t{2} << (bits + 1)) <= n) ++bits;
  const int shift = 64 - bits;
  std::vector<Key> keys(n);
  std::vector<uint32_t> starts((size_t{1} << bits) + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = MixKey(indices[i]);
    ++starts[(keys[i] >> shift) + 1];
  }
  for (size_t b = 1; b < starts.size(); ++b) starts[b] += starts[b - 1];
  std::vector<uint32_t> next(starts.begin(), starts.end() - 1);
  // In ascending order of non-zero within each bucket.
  for (size_t i = 0; i < n; ++i)
    sorted[next[keys[i] >> shift]++] = {keys[i], static_cast<uint32_t>(i)};
  for (size_t b = 0; b + 1 < starts.size(); ++b) {
    const uint32_t begin = starts[b];
    const uint32_t end = starts[b + 1];
    if (end - begin > kInsertionSortMax) {
      std::sort(sorted.begin() + begin, sorted.begin() + end);
      continue;
    }
    for (uint32_t i = begin + 1; i < end; ++i) {
      const MixedNonZero pair = sorted[i];
      uint32_t j = i;
      for (; j > begin && pair < sorted[j - 1]; --j) sorted[j] = sorted[j - 1];
      sorted[j] = pair;
    }
  }
  return sorted;
}

}  // namespace

void PrepareKeys(PreparedBatch* prepared) {
  const auto& indices = prepared->batch.indices;
  const std::vector<MixedNonZero> mixed = SortedMixedKeys(indices);
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
  for (size_t s = 0; s < splits_.size(); ++s) {
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
      std::lock_guard<std::mutex> lock(mutex_);
      bytes_ += held_->bytes_read[s];
      continue;
    }
    const InputSplit& split = splits_[s];
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
