// Fuzzes the csv example reader (io/readers.h) through OpenReader; see
// reader_fuzzer.h for what counts as a bug.
#include "fuzz_util.h"
#include "reader_fuzzer.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  keel::fuzz::QuietLogging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return keel::fuzz::FuzzReader(keel::DataFormat::kCsv, "data.csv", data, size);
}
