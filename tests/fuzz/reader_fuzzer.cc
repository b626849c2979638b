#include "reader_fuzzer.h"

#include <string>

#include "base/error.h"
#include "fuzz_util.h"
#include "io/batch.h"

namespace keel::fuzz {
namespace {

// Options chosen by the input's size: every combination is reached as the
// fuzzer grows and shrinks inputs.
ReaderOptions OptionsFor(DataFormat format, size_t size) {
  ReaderOptions options;
  options.format = format;
  options.block_size = 16 + size % 61;  // small: records cross block boundaries
  options.zero_based = (size & 1) != 0;
  options.skip_bad_records = ((size >> 1) & 1) != 0;
  options.feature_dim = ((size >> 2) & 1) != 0 ? 1000 : 0;
  const LabelRule rules[] = {LabelRule::kFinite, LabelRule::kBinary, LabelRule::kClassId};
  options.labels = rules[(size >> 3) % 3];
  options.num_classes = 3;
  return options;
}

// The batch's invariants (io/batch.h).
void CheckBatch(const Batch& batch) {
  if (batch.row_offsets.empty() || batch.row_offsets.back() != batch.indices.size() ||
      batch.indices.size() != batch.values.size() ||
      batch.labels.size() != batch.rows() * static_cast<size_t>(batch.label_width)) {
    __builtin_trap();
  }
}

void ReadSplit(const InputSplit& split, const ReaderOptions& options, size_t size) {
  std::unique_ptr<ExampleReader> reader = OpenReader(split, options);
  Batch batch;
  size_t errors = 0;
  for (;;) {
    try {
      if (reader->Read(7, &batch) == 0) break;
    } catch (const Error&) {
      if (++errors > size + 1) __builtin_trap();  // no progress after an Error
    }
    CheckBatch(batch);
    batch.Clear();
  }
}

}  // namespace

int FuzzReader(DataFormat format, const char* file_name, const uint8_t* data, size_t size) {
  const std::string path = ScratchFolder() + "/" + file_name;
  WriteScratchFile(path, std::string(reinterpret_cast<const char*>(data), size));
  const ReaderOptions options = OptionsFor(format, size);
  InputSplit whole;
  whole.path = path;
  InputSplit first = whole, second = whole;
  first.end = second.begin = size / 2;
  second.end = size;
  try {
    ReadSplit(whole, options, size);
    ReadSplit(first, options, size);
    ReadSplit(second, options, size);
  } catch (const Error&) {  // OpenReader's own (an unreadable file)
  }
  return 0;
}

}  // namespace keel::fuzz
