// Fuzzes DecodeSnapshot (io/checkpoint.h), what `keel checkpoint verify` and a
// resuming scheduler and servers run on a server-N.snap file. The harness
// rewrites the last 8 bytes as the checksum of the rest, so the fuzzer reaches
// the structure behind it.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "fuzz_util.h"
#include "io/checkpoint.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  keel::fuzz::QuietLogging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes = keel::fuzz::WithValidChecksum(data, size);
  try {
    const keel::ServerSnapshot snapshot = keel::DecodeSnapshot(bytes, "fuzz.snap");
    for (const keel::SnapshotTable& table : snapshot.tables) {
      if (table.rows.size() != table.keys.size() * table.row_width) __builtin_trap();
    }
  } catch (const keel::Error&) {
  }
  return 0;
}
