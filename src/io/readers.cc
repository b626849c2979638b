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

bool HeldOut(const Batch& batch, size_t row, double share) {
  const auto mix = [](uint64_t h, uint64_t word) {
    // splitmix64's finaliser over the running hash and the next word.
    uint64_t z = h ^ (word + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  const auto bits = [](float value) {
    uint32_t word;
    std::memcpy(&word, &value, sizeof word);
    return uint64_t{word};
  };
  const size_t width = static_cast<size_t>(batch.label_width);
  uint64_t h = 0x5eedf00dull;
  for (size_t l = 0; l < width; ++l) h = mix(h, bits(batch.labels[row * width + l]));
  for (uint64_t i = batch.row_offsets[row]; i < batch.row_offsets[row + 1]; ++i) {
    if (batch.values[i] == 0.0f) continue;
    h = mix(mix(h, batch.indices[i]), bits(batch.values[i]));
  }
  return static_cast<double>(h >> 11) * 0x1.0p-53 < share;
}

namespace {

// Yields one side of a holdout (ReaderOptions::holdout_share) of another
// reader's rows.
class HoldoutReader : public ExampleReader {
 public:
  HoldoutReader(std::unique_ptr<ExampleReader> reader, double share, bool held_out)
      : reader_(std::move(reader)), share_(share), held_out_(held_out) {}

  size_t Read(size_t max_rows, Batch* batch) override {
    size_t kept = 0;
    while (kept < max_rows) {
      read_.Clear();
      if (reader_->Read(max_rows - kept, &read_) == 0) break;
      for (size_t r = 0; r < read_.rows(); ++r) {
        if (HeldOut(read_, r, share_) != held_out_) continue;
        batch->AppendRows(read_, r, 1);
        ++kept;
      }
    }
    return kept;
  }
  uint64_t skipped_records() const override { return reader_->skipped_records(); }
  uint64_t bytes_read() const override { return reader_->bytes_read(); }

 private:
  std::unique_ptr<ExampleReader> reader_;
  double share_;
  bool held_out_;
  Batch read_;
};

std::unique_ptr<ExampleReader> OpenFormatReader(const InputSplit& split,
                                                const ReaderOptions& options) {
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

}  // namespace

std::unique_ptr<ExampleReader> OpenReader(const InputSplit& split, const ReaderOptions& options) {
  if (!split.is_pipe && split.begin > split.end) {
    throw MakeError(split.path, ": bad split: begin ", split.begin, " is past end ", split.end);
  }
  std::unique_ptr<ExampleReader> reader = OpenFormatReader(split, options);
  if (options.holdout_share <= 0.0) return reader;
  return std::make_unique<HoldoutReader>(std::move(reader), options.holdout_share,
                                         options.holdout_side);
}

}  // namespace keel
