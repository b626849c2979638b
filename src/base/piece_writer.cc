#include "base/piece_writer.h"

#include <utility>

namespace keel {

PieceWriter::PieceWriter(Sink sink, size_t piece_bytes)
    : sink_(std::move(sink)), piece_bytes_(piece_bytes) {
  buffer_.reserve(piece_bytes_);
}

void PieceWriter::Bytes(const void* data, size_t size) {
  if (size == 0) return;
  if (buffer_.size() + size <= piece_bytes_) {
    buffer_.append(static_cast<const char*>(data), size);
    return;
  }
  Flush();
  if (size < piece_bytes_) {
    buffer_.append(static_cast<const char*>(data), size);
    return;
  }
  HandOver(data, size);
}

uint64_t PieceWriter::Finish() {
  Flush();
  const uint64_t sum = checksum_.value();
  HandOver(&sum, sizeof(sum));
  return sum;
}

void PieceWriter::Flush() {
  if (buffer_.empty()) return;
  HandOver(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void PieceWriter::HandOver(const void* data, size_t size) {
  checksum_.Add(data, size);
  bytes_ += size;
  sink_(std::string_view(static_cast<const char*>(data), size));
}

}  // namespace keel
