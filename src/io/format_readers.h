// The readers of each data format behind OpenReader (io/readers.h), for
// readers.cc only: text_readers.cc (libsvm, csv) and
// recordio_example_reader.cc (recordIO-protobuf).
#ifndef KEEL_IO_FORMAT_READERS_H_
#define KEEL_IO_FORMAT_READERS_H_

#include <memory>
#include <string>

#include "io/example_reader.h"
#include "io/input_split.h"

namespace keel {

// Applies options.labels to the finite *label: returns true, with a binary
// -1 or +1 rewritten to 0 or 1, if the rule allows it; else false with
// *problem naming the value and the rule. Readers call it once per label,
// only when options.labels is not kFinite (they reject non-finite numbers
// themselves).
bool CheckLabel(const ReaderOptions& options, float* label, std::string* problem);

std::unique_ptr<ExampleReader> OpenLibsvmReader(const InputSplit& split,
                                                const ReaderOptions& options);
std::unique_ptr<ExampleReader> OpenCsvReader(const InputSplit& split, const ReaderOptions& options);
std::unique_ptr<ExampleReader> OpenRecordIOExampleReader(const InputSplit& split,
                                                         const ReaderOptions& options);

}  // namespace keel

#endif  // KEEL_IO_FORMAT_READERS_H_
