#include "worker/shard_check.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "io/batch.h"

namespace keel {
namespace {

// The rows of one split (all of them: a bad record throws).
uint64_t CountRows(const InputSplit& split, const ReaderOptions& reader) {
  constexpr size_t kRowsPerRead = 4096;
  uint64_t rows = 0;
  Batch scratch;
  const auto split_reader = OpenReader(split, reader);
  while (true) {
    scratch.Clear();
    const size_t got = split_reader->Read(kRowsPerRead, &scratch);
    if (got == 0) break;
    rows += got;
  }
  return rows;
}

// `splits` (pipes left out) in order, each text split of known size cut into
// up to `threads` byte ranges of at least `min_piece_bytes`: a record belongs
// to the range holding its first byte, so the pieces hold the same records.
// RecordIO is not cut: a reader starting inside a split skips to the next
// record's magic, passing over whatever bytes come before it unchecked.
std::vector<InputSplit> Pieces(const std::vector<InputSplit>& splits, DataFormat format,
                               size_t threads, uint64_t min_piece_bytes) {
  std::vector<InputSplit> pieces;
  for (const InputSplit& split : splits) {
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
    }
  }
  return pieces;
}

}  // namespace

uint64_t CheckShard(const std::vector<InputSplit>& splits, const ReaderOptions& reader,
                    int threads, uint64_t min_piece_bytes) {
  if (threads <= 0) {
    threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  }
  const std::vector<InputSplit> pieces =
      Pieces(splits, reader.format, static_cast<size_t>(threads), min_piece_bytes);
  std::vector<uint64_t> rows(pieces.size(), 0);
  std::vector<std::exception_ptr> errors(pieces.size());
  // Pieces are taken in order; once one fails, those after it are not read
  // (the error reported is the first bad record's in the splits' order).
  std::atomic<size_t> next{0};
  std::atomic<size_t> first_failed{pieces.size()};
  const auto work = [&] {
    for (size_t i = next++; i < pieces.size(); i = next++) {
      if (i > first_failed.load()) continue;
      try {
        rows[i] = CountRows(pieces[i], reader);
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
    total += rows[i];
  }
  return total;
}

}  // namespace keel
