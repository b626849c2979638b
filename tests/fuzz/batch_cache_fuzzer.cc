// Fuzzes BatchCacheReader (worker/batch_cache.h): a worker's cache of parsed
// minibatches is a local file, untrusted like any input. The harness takes
// the file's key from its header and rewrites the footer's checksum (an
// attacker can compute both), so the fuzzer reaches the batches behind
// them; each batch that decodes must be one the compute can use in bounds.
#include <cstdint>
#include <cstring>
#include <string>

#include "base/checksum.h"
#include "base/error.h"
#include "fuzz_util.h"
#include "worker/batch_cache.h"
#include "worker/batch_stream.h"

namespace {

// The file's header holds its key at this offset; the footer is 48 bytes,
// its checksum (of its first 32) 16 bytes before the end.
constexpr size_t kKeyOffset = 16;
constexpr size_t kFooterBytes = 48;
constexpr size_t kFooterChecksumBytes = 32;

// Traps unless `prepared` is a batch the backends can read in bounds.
void CheckUsable(const keel::PreparedBatch& prepared) {
  const keel::Batch& batch = prepared.batch;
  const size_t rows = batch.rows();
  const size_t nnz = batch.nnz();
  if (batch.values.size() != nnz || batch.row_offsets.back() != nnz ||
      batch.labels.size() != rows * static_cast<size_t>(batch.label_width)) {
    __builtin_trap();
  }
  for (size_t r = 0; r < rows; ++r) {
    if (batch.row_offsets[r] > batch.row_offsets[r + 1]) __builtin_trap();
  }
  if (prepared.positions.size() != nnz || prepared.nonzeros_by_key.size() != nnz ||
      prepared.key_offsets.size() != prepared.keys.size() + 1) {
    __builtin_trap();
  }
  for (uint32_t position : prepared.positions) {
    if (position >= prepared.keys.size()) __builtin_trap();
  }
  for (uint32_t nonzero : prepared.nonzeros_by_key) {
    if (nonzero >= nnz) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  keel::fuzz::QuietLogging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  uint64_t key = 0;
  if (bytes.size() >= kKeyOffset + sizeof(key)) {
    std::memcpy(&key, bytes.data() + kKeyOffset, sizeof(key));
  }
  if (bytes.size() >= kKeyOffset + sizeof(key) + kFooterBytes) {
    char* footer = bytes.data() + bytes.size() - kFooterBytes;
    const uint64_t sum = keel::WordChecksum64(footer, kFooterChecksumBytes);
    std::memcpy(footer + kFooterChecksumBytes, &sum, sizeof(sum));
  }
  const std::string folder = keel::fuzz::ScratchFolder() + "/cache";
  try {
    keel::BatchCache cache(folder, "fuzz.batches", uint64_t{1} << 30);
    keel::fuzz::WriteScratchFile(cache.path(), bytes);
    std::unique_ptr<keel::BatchCacheReader> reader = cache.OpenReader(key);
    if (!reader) return 0;  // refused (and removed), as a job would
    keel::PreparedBatch prepared;
    while (reader->Next(&prepared)) CheckUsable(prepared);
  } catch (const keel::Error&) {
  }
  return 0;
}
