// ByteWriter and ByteReader: fixed-width values in and out of a byte string,
// in the machine's byte order, for Keel's own binary files (model artifacts,
// checkpoint snapshots, shard copies).
#ifndef KEEL_BASE_BINARY_H_
#define KEEL_BASE_BINARY_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

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
// (reading WHAT)" otherwise. A decoder reads every count and size a file
// claims with GetCount or GetBounded, so that nothing is allocated for a
// claim the file's bytes cannot hold. Not synchronized.
class ByteReader {
 public:
  // Up to `length` bytes from `offset` of a source (fewer only at its end).
  using Fetch = std::function<std::string(uint64_t offset, uint64_t length)>;

  ByteReader(std::string_view bytes, std::string where)
      : bytes_(bytes), size_(bytes.size()), where_(std::move(where)) {}
  // Reads the first `size` bytes of a source too large to hold whole: a
  // window of up to 1 MiB at a time through `fetch`, and a read larger than
  // that straight into its destination.
  ByteReader(Fetch fetch, uint64_t size, std::string where)
      : fetch_(std::move(fetch)), size_(size), where_(std::move(where)) {}

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
    if (fetch_) {
      Fetched(static_cast<char*>(out), size, what);
    } else {
      std::memcpy(out, bytes_.data() + offset_, size);
    }
    offset_ += size;
  }
  // Passes over `size` bytes (checked to be there, as Bytes does).
  void Skip(size_t size, const char* what) {
    if (remaining() < size) {
      throw MakeError(where_, ": truncated at byte ", offset_, " (reading ", what, ")");
    }
    offset_ += size;
  }
  // A count of `element_bytes`-byte elements that follow: checked to be at
  // most `max` ("WHERE: at byte OFFSET, WHAT N is more than MAX") and to fit
  // in the bytes left ("WHERE: truncated at byte OFFSET: WHAT N needs ..."),
  // before anyone allocates for it. Throws Error otherwise.
  template <typename T>
  T GetCount(const char* what, size_t element_bytes, uint64_t max) {
    const size_t at = offset_;
    const T count = Get<T>(what);
    if (static_cast<uint64_t>(count) > max) {
      throw ErrorAt(at, what, " ", static_cast<uint64_t>(count), " is more than ", max);
    }
    if (element_bytes != 0 && static_cast<uint64_t>(count) > remaining() / element_bytes) {
      throw MakeError(where_, ": truncated at byte ", at, ": ", what, " ",
                      static_cast<uint64_t>(count), " needs ", element_bytes,
                      " bytes each, more than the ", remaining(), " bytes left");
    }
    return count;
  }
  // A value checked to be in [low, high]; throws Error "WHERE: at byte
  // OFFSET, WHAT N is outside LOW..HIGH" otherwise.
  template <typename T>
  T GetBounded(const char* what, T low, T high) {
    const size_t at = offset_;
    const T value = Get<T>(what);
    if (value < low || value > high) {
      throw ErrorAt(at, what, " ", +value, " is outside ", +low, "..", +high);
    }
    return value;
  }
  // Error "WHERE: at byte OFFSET, PARTS", for a decoder's own checks.
  template <typename... Parts>
  Error ErrorAt(size_t offset, Parts&&... parts) const {
    return MakeError(where_, ": at byte ", offset, ", ", std::forward<Parts>(parts)...);
  }

  size_t offset() const { return offset_; }
  size_t remaining() const { return size_ - offset_; }
  const std::string& where() const { return where_; }

 private:
  static constexpr size_t kWindow = size_t{1} << 20;

  // Bytes [offset_, offset_ + size) of a fetched source, into `out`.
  void Fetched(char* out, size_t size, const char* what) {
    size_t at = offset_;
    while (size > 0) {
      if (at < window_at_ || at >= window_at_ + window_.size()) {
        if (size >= kWindow) {
          const std::string piece = fetch_(at, size);
          if (piece.size() != size) Short(at, what);
          std::memcpy(out, piece.data(), size);
          return;
        }
        window_ = fetch_(at, std::min<uint64_t>(kWindow, size_ - at));
        window_at_ = at;
        if (window_.size() < size) Short(at, what);
      }
      const size_t count = std::min(size, window_at_ + window_.size() - at);
      std::memcpy(out, window_.data() + (at - window_at_), count);
      out += count;
      at += count;
      size -= count;
    }
  }
  [[noreturn]] void Short(size_t at, const char* what) const {
    throw MakeError(where_, ": truncated at byte ", at, " (reading ", what,
                    "; the source ended early)");
  }

  std::string_view bytes_;
  Fetch fetch_;
  size_t size_ = 0;
  std::string where_;
  size_t offset_ = 0;
  std::string window_;  // fetched bytes from window_at_
  size_t window_at_ = 0;
};

}  // namespace keel

#endif  // KEEL_BASE_BINARY_H_
