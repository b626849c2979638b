#include "io/readers.h"

#include "base/error.h"
#include "io/format_readers.h"

namespace keel {

ExampleReader::~ExampleReader() = default;

DataFormat ParseDataFormat(const std::string& name) {
  if (name == "libsvm" || name == "text/libsvm") return DataFormat::kLibsvm;
  if (name == "csv" || name == "text/csv") return DataFormat::kCsv;
  if (name == "recordio-protobuf" || name == "recordio" ||
      name == "application/x-recordio-protobuf") {
    return DataFormat::kRecordIO;
  }
  throw MakeError("unknown data format '", name,
                  "': expected libsvm, csv or recordio-protobuf (also "
                  "recordio, text/libsvm, "
                  "text/csv, application/x-recordio-protobuf)");
}

const char* DataFormatName(DataFormat format) {
  switch (format) {
    case DataFormat::kLibsvm:
      return "libsvm";
    case DataFormat::kCsv:
      return "csv";
    case DataFormat::kRecordIO:
      return "recordio-protobuf";
  }
  return "unknown";
}

std::unique_ptr<ExampleReader> OpenReader(const InputSplit& split, const ReaderOptions& options) {
  if (!split.is_pipe && split.begin > split.end) {
    throw MakeError(split.path, ": bad split: begin ", split.begin, " is past end ", split.end);
  }
  switch (options.format) {
    case DataFormat::kLibsvm:
      return OpenLibsvmReader(split, options);
    case DataFormat::kCsv:
      return OpenCsvReader(split, options);
    case DataFormat::kRecordIO:
      return OpenRecordIOExampleReader(split, options);
  }
  throw MakeError(split.path, ": unknown data format");
}

}  // namespace keel
