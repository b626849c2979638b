// PieceWriter: a file's bytes handed to a sink a piece at a time (a folder's
// file written as it comes, S3 parts as they fill), checksummed as they go,
// ending with the checksum of every byte before it. Snapshot files and the
// model artifact's weights.bin are written through it, so neither is ever
// whole in memory.
//
// Not synchronized: one writer, one thread.
#ifndef KEEL_BASE_PIECE_WRITER_H_
#define KEEL_BASE_PIECE_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/checksum.h"

namespace keel {

class PieceWriter {
 public:
  using Sink = std::function<void(std::string_view piece)>;

  // Pieces are about `piece_bytes` long; a larger array goes to `sink` as it
  // is.
  explicit PieceWriter(Sink sink, size_t piece_bytes = size_t{1} << 20);

  template <typename T>
  void Put(const T& value) {
    Bytes(&value, sizeof(T));
  }
  void Bytes(const void* data, size_t size);

  // Appends the checksum (Checksum64) of everything before it, hands over
  // what is left, and returns that checksum.
  uint64_t Finish();

  // Bytes handed to the sink so far.
  uint64_t bytes() const { return bytes_; }
  // The checksum of every byte handed over so far (after Finish, the
  // trailing checksum's 8 bytes too).
  uint64_t checksum() const { return checksum_.value(); }

 private:
  void Flush();
  void HandOver(const void* data, size_t size);

  const Sink sink_;
  const size_t piece_bytes_;
  std::string buffer_;
  Checksum64 checksum_;
  uint64_t bytes_ = 0;
};

}  // namespace keel

#endif  // KEEL_BASE_PIECE_WRITER_H_
