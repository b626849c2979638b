// The readers of each data format behind OpenReader (io/readers.h), for
// readers.cc only: text_readers.cc (libsvm, csv) and
// recordio_example_reader.cc (recordIO-protobuf).
#ifndef KEEL_IO_FORMAT_READERS_H_
#define KEEL_IO_FORMAT_READERS_H_

#include <memory>

#include "io/input_split.h"
#include "io/readers.h"

namespace keel {

std::unique_ptr<ExampleReader> OpenLibsvmReader(const InputSplit& split,
                                                const ReaderOptions& options);
std::unique_ptr<ExampleReader> OpenCsvReader(const InputSplit& split, const ReaderOptions& options);
std::unique_ptr<ExampleReader> OpenRecordIOExampleReader(const InputSplit& split,
                                                         const ReaderOptions& options);

}  // namespace keel

#endif  // KEEL_IO_FORMAT_READERS_H_
