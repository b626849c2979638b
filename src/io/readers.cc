#include "io/readers.h"

#include <sstream>

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

namespace {

// The label as a message shows it: "2", "0.5", "-3".
std::string LabelText(float label) {
  std::ostringstream text;
  text << label;
  return text.str();
}

}  // namespace

bool CheckLabel(const ReaderOptions& options, float* label, std::string* problem) {
  switch (options.labels) {
    case LabelRule::kFinite:
      return true;
    case LabelRule::kBinary:
      if (*label == 0.0f || *label == 1.0f) return true;
      if (*label == -1.0f) {
        *label = 0.0f;
        return true;
      }
      *problem = "label " + LabelText(*label) + " is not a binary label (0/1 or -1/+1)";
      return false;
    case LabelRule::kClassId:
      if (*label >= 0.0f && *label < static_cast<float>(options.num_classes) &&
          *label == static_cast<float>(static_cast<int>(*label))) {
        return true;
      }
      *problem = "label " + LabelText(*label) + " is not a class id in 0.." +
                 std::to_string(options.num_classes - 1) + " (num_classes " +
                 std::to_string(options.num_classes) + ")";
      return false;
  }
  return true;
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
