#include "worker/shard_check.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "base/thread_pool.h"
#include "io/batch.h"
#include "worker/batch_cache.h"

namespace keel {
namespace {

// The memory a batch's arrays take.
// The rows of the pieces kept so far, and what they take, across threads.
struct KeepBudget {
  uint64_t max_bytes = 0;
  std::atomic<uint64_t> held{0};
  std::atomic<bool> over{false};

  // Counts `bytes` more; false (and from then on) once past the budget.
  bool Take(uint64_t bytes) {
    if (over.load()) return false;
    if (held.fetch_add(bytes) + bytes <= max_bytes) return true;
    over.store(true);
    return false;
  }
};

// What a piece read: its rows' count, and its rows if kept.
struct PieceRows {
  uint64_t rows = 0;
  uint64_t bytes_read = 0;
  std::vector<Batch> chunks;
};

// The rows of one split (all of them: a bad record throws), kept in `*piece`
// while `budget` (if any) allows.
void ReadRows(const InputSplit& split, const ReaderOptions& reader, KeepBudget* budget,
              PieceRows* piece) {
  constexpr size_t kRowsPerRead = 4096;
  Batch chunk;
  const auto split_reader = OpenReader(split, reader);
  while (true) {
    const size_t got = split_reader->Read(kRowsPerRead, &chunk);
    if (got == 0) break;
    piece->rows += got;
    if (budget != nullptr && budget->Take(chunk.memory_bytes())) {
      // The next chunk is about as large: room for it up front.
      const size_t nnz = chunk.nnz();
      piece->chunks.push_back(std::move(chunk));
      chunk = Batch();
      chunk.indices.reserve(nnz + nnz / 8);
      chunk.values.reserve(nnz + nnz / 8);
      chunk.labels.reserve(kRowsPerRead);
      chunk.row_offsets.reserve(kRowsPerRead + 1);
    } else {
      if (budget != nullptr) piece->chunks.clear();
      chunk.Clear();
    }
  }
  piece->bytes_read = split_reader->bytes_read();
}

// `splits` (pipes left out) in order, each text split of known size cut into
// up to `threads` byte ranges of at least `min_piece_bytes`: a record belongs
// to the range holding its first byte, so the pieces hold the same records.
// RecordIO is not cut: a reader starting inside a split skips to the next
// record's magic, passing over whatever bytes come before it unchecked.
// `*owners` gets each piece's index in `splits`.
std::vector<InputSplit> Pieces(const std::vector<InputSplit>& splits, DataFormat format,
                               size_t threads, uint64_t min_piece_bytes,
                               std::vector<size_t>* owners) {
  std::vector<InputSplit> pieces;
  for (size_t s = 0; s < splits.size(); ++s) {
    const InputSplit& split = splits[s];
    if (split.is_pipe) continue;
    const uint64_t end = std::min(split.end, split.file_size);
    const uint64_t bytes = end > split.begin ? end - split.begin : 0;
    const uint64_t most = format == DataFormat::kRecordIO ? 1 : threads;
    const uint64_t count =
        std::clamp<uint64_t>(bytes / std::max<uint64_t>(min_piece_bytes, 1), 1, most);
    for (uint64_t i = 0; i < count; ++i) {
      InputSplit piece = split;
      if (count > 1) {
        piece.begin = split.begin + bytes / count * i;
        piece.end = i + 1 == count ? split.end : split.begin + bytes / count * (i + 1);
      }
      pieces.push_back(std::move(piece));
      owners->push_back(s);
    }
  }
  return pieces;
}

}  // namespace

bool CheckedRows::Holds(const std::vector<InputSplit>& splits, const ReaderOptions& reader) const {
  return !empty() && key == BatchCacheKey(splits, reader, 0);
}

uint64_t HoldStreamHead(const InputSplit& split, const ReaderOptions& reader, uint64_t rows,
                        CheckedRows* held) {
  held->Clear();
  std::unique_ptr<ExampleReader> stream = OpenReader(split, reader);
  Batch head;
  while (head.rows() < rows) {
    if (stream->Read(static_cast<size_t>(rows - head.rows()), &head) == 0) break;
  }
  const uint64_t read = head.rows();
  held->key = BatchCacheKey({split}, reader, 0);
  held->held_bytes = head.memory_bytes();
  held->chunks.resize(1);
  held->chunks[0].push_back(std::move(head));
  held->bytes_read.push_back(0);
  held->rest.push_back(std::move(stream));
  return read;
}

uint64_t CheckShard(const std::vector<InputSplit>& splits, const ReaderOptions& reader, int threads,
                    uint64_t min_piece_bytes, CheckedRows* keep, uint64_t keep_max_bytes) {
  if (threads <= 0) {
    threads = ThreadsUpTo(4);
  }
  if (keep != nullptr) keep->Clear();
  const bool any_pipe = std::any_of(splits.begin(), splits.end(),
                                    [](const InputSplit& split) { return split.is_pipe; });
  KeepBudget budget;
  budget.max_bytes = keep_max_bytes;
  KeepBudget* keeping = keep != nullptr && !any_pipe && !splits.empty() ? &budget : nullptr;
  std::vector<size_t> owners;
  const std::vector<InputSplit> pieces =
      Pieces(splits, reader.format, static_cast<size_t>(threads), min_piece_bytes, &owners);
  std::vector<PieceRows> read(pieces.size());
  std::vector<std::exception_ptr> errors(pieces.size());
  // Pieces are taken in order; once one fails, those after it are not read
  // (the error reported is the first bad record's in the splits' order).
  std::atomic<size_t> next{0};
  std::atomic<size_t> first_failed{pieces.size()};
  const auto work = [&] {
    for (size_t i = next++; i < pieces.size(); i = next++) {
      if (i > first_failed.load()) continue;
      try {
        ReadRows(pieces[i], reader, keeping, &read[i]);
      } catch (...) {
        errors[i] = std::current_exception();
        size_t failed = first_failed.load();
        while (i < failed && !first_failed.compare_exchange_weak(failed, i)) {
        }
      }
    }
  };
  // This thread and up to threads - 1 helpers (fewer if the system has no
  // more to give).
  const size_t workers = std::min(pieces.size(), static_cast<size_t>(threads));
  std::vector<std::thread> helpers;
  helpers.reserve(workers);
  for (size_t t = 1; t < workers; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (...) {
      break;
    }
  }
  work();
  for (std::thread& helper : helpers) helper.join();
  uint64_t total = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
    total += read[i].rows;
  }
  if (keeping == nullptr || budget.over.load()) return total;
  // A split's pieces hold its records in order: their chunks, one after another.
  keep->key = BatchCacheKey(splits, reader, 0);
  keep->chunks.resize(splits.size());
  keep->bytes_read.assign(splits.size(), 0);
  keep->held_bytes = budget.held.load();
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::vector<Batch>& chunks = keep->chunks[owners[i]];
    for (Batch& chunk : read[i].chunks) chunks.push_back(std::move(chunk));
    keep->bytes_read[owners[i]] += read[i].bytes_read;
  }
  return total;
}

}  // namespace keel
