// The body of the three example-reader targets (libsvm, csv, recordio): the
// input is written to a file and read through OpenReader, whole and as two
// splits cut at its middle, with options drawn from the input's size (so the
// seeds stay plain files of the format). Every Error is caught and reading
// goes on, as a job with skip_bad_records does; each Error must consume input,
// so more Errors than the input has bytes is a bug (a reader that stopped
// making progress).
#ifndef KEEL_TESTS_FUZZ_READER_FUZZER_H_
#define KEEL_TESTS_FUZZ_READER_FUZZER_H_

#include <cstddef>
#include <cstdint>

#include "io/readers.h"

namespace keel::fuzz {

int FuzzReader(DataFormat format, const char* file_name, const uint8_t* data, size_t size);

}  // namespace keel::fuzz

#endif  // KEEL_TESTS_FUZZ_READER_FUZZER_H_
