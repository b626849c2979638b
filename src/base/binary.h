// ByteWriter and ByteReader: fixed-width values in and out of a byte string,
// in the machine's byte order, for Keel's own binary files (model artifacts,
// checkpoint snapshots, shard copies).
#ifndef KEEL_BASE_BINARY_H_
#define KEEL_BASE_BINARY_H_

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

#include "base/error.h"

namespace keel {

// Appends to a string it owns. Not synchronized.
class ByteWriter {
 public:
  template <typename T>
  void Put(const T& value) {
    Bytes(&value, sizeof(T));
  }
  void Bytes(const void* data, size_t size) { out_.append(static_cast<const char*>(data), size); }
  void Reserve(size_t size) { out_.reserve(size); }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// Reads from bytes it does not own (they must outlive it). Every read checks
// that the bytes are there and throws Error "WHERE: truncated at byte N
// (reading WHAT)" otherwise. Not synchronized.
class ByteReader {
 public:
  ByteReader(std::string_view bytes, std::string where) : bytes_(bytes), where_(std::move(where)) {}

  template <typename T>
  T Get(const char* what) {
    T value;
    Bytes(&value, sizeof(T), what);
    return value;
  }
  void Bytes(void* out, size_t size, const char* what) {
    if (remaining() < size) {
      throw MakeError(where_, ": truncated at byte ", offset_, " (reading ", what, ")");
    }
    if (size == 0) return;  // `out` may be an empty vector's null data()
    std::memcpy(out, bytes_.data() + offset_, size);
    offset_ += size;
  }
  size_t offset() const { return offset_; }
  size_t remaining() const { return bytes_.size() - offset_; }
  const std::string& where() const { return where_; }

 private:
  std::string_view bytes_;
  std::string where_;
  size_t offset_ = 0;
};

}  // namespace keel

#endif  // KEEL_BASE_BINARY_H_
