#include "io/readers.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string_view>

#include "base/error.h"
#include "io/format_readers.h"
#include "io/recordio.h"
#include "record.pb.h"

namespace keel {

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

bool FirstRecordLabelled(const InputSplit& split, const ReaderOptions& options, uint64_t features) {
  if (split.is_pipe) return true;
  if (options.format == DataFormat::kRecordIO) {
    RecordIOReader records(split, size_t{1} << 20);
    std::string_view payload;
    aialgs::data::Record record;
    if (!records.ReadRecord(&payload) || !record.ParseFromArray(payload.data(), payload.size())) {
      return true;  // the reader reports what is wrong
    }
    return record.label().count("values") > 0;
  }
  // The first line that holds a record (at most 64 MiB long).
  constexpr size_t kMaxLine = size_t{64} << 20;
  BlockReader file(split.path, false, split.begin, size_t{1} << 20);
  for (;;) {
    size_t length = 0;
    for (;;) {
      const void* newline = std::memchr(file.data(), '\n', file.size());
      if (newline != nullptr) {
        length = static_cast<const char*>(newline) - file.data();
        break;
      }
      if (file.size() >= kMaxLine || !file.Fill(file.size() + 1)) {
        length = file.size();
        break;
      }
    }
    if (length == 0 && file.size() == 0) return true;
    std::string_view line(file.data(), length);
    if (options.format == DataFormat::kLibsvm) line = line.substr(0, line.find('#'));
    const size_t first = line.find_first_not_of(" \t\r\v\f");
    if (first != std::string_view::npos) {
      if (options.format == DataFormat::kCsv) {
        const auto columns = 1 + static_cast<uint64_t>(std::count(line.begin(), line.end(), ','));
        return features == 0 || columns != features;
      }
      const size_t token_end = line.find_first_of(" \t\r\v\f", first);
      return line.substr(first, token_end - first).find(':') == std::string_view::npos;
    }
    file.Consume(std::min(file.size(), length + 1));
  }
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
