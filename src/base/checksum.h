// Checksum64: FNV-1a over a byte stream, the checksum of Keel's own files
// (model artifacts, checkpoint snapshots). WordChecksum64: a checksum of large
// buffers read often (the batch cache), eight bytes a step on four lanes,
// several times FNV-1a's speed.
#ifndef KEEL_BASE_CHECKSUM_H_
#define KEEL_BASE_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
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

inline uint64_t WordChecksum64(const void* data, size_t size) {
  constexpr uint64_t kMultiplier = 0x9e3779b97f4a7c15ULL;
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t lanes[4] = {0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL, 0xa4093822299f31d0ULL,
                       0x082efa98ec4e6c89ULL};
  size_t at = 0;
  for (; at + 32 <= size; at += 32) {
    for (int lane = 0; lane < 4; ++lane) {
      uint64_t word;
      std::memcpy(&word, bytes + at + 8 * lane, 8);
      lanes[lane] = (lanes[lane] ^ word) * kMultiplier;
      lanes[lane] ^= lanes[lane] >> 29;
    }
  }
  uint64_t hash = size;
  for (uint64_t lane : lanes) hash = (hash ^ lane) * kMultiplier;
  for (; at < size; ++at) hash = (hash ^ bytes[at]) * 0x100000001b3ULL;
  return hash ^ (hash >> 31);
}

inline std::string ChecksumHex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace keel

#endif  // KEEL_BASE_CHECKSUM_H_
