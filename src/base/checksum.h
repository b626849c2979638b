// Checksum64: FNV-1a over a byte stream, the checksum of Keel's own files
// (model artifacts, checkpoint snapshots).
#ifndef KEEL_BASE_CHECKSUM_H_
#define KEEL_BASE_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace keel {

class Checksum64 {
 public:
  void Add(const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    uint64_t hash = hash_;
    for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
    hash_ = hash;
  }
  uint64_t value() const { return hash_; }

  static uint64_t Of(const void* data, size_t size) {
    Checksum64 sum;
    sum.Add(data, size);
    return sum.value();
  }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

inline std::string ChecksumHex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace keel

#endif  // KEEL_BASE_CHECKSUM_H_
