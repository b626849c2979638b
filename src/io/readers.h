// Example readers: the training data formats, read from an InputSplit into
// minibatches (keel::Batch).
//
// Formats:
// - libsvm (svmlight): "label index:value index:value ..." per line. Blank
//   lines and lines starting with '#' are skipped, a trailing "# comment" is
//   allowed, a "qid:N" token is ignored. Indices are 1-based unless
//   ReaderOptions::zero_based; the batch holds them 0-based.
// - csv: no header; the label, then dense features: column j after the label
//   is feature j (0-based). Every column is stored, zeros included. Blank
//   lines are skipped; every row must have as many columns as the file's first
//   row.
// - recordIO-protobuf (SageMaker): RecordIO records (io/recordio.h) holding an
//   aialgs.data.Record whose features["values"] and label["values"] are
//   float32 tensors. Features are dense (values only; the shape, if given,
//   must match the count) or sparse (keys are the 0-based feature indices,
//   one per value; a shape, if given, bounds the keys). The label may hold
//   several values: the batch's label_width is set from the first record, and
//   later records must match it.
// Text lines may end with "\r\n". Numbers may not be NaN or infinite.
// Labels are checked as they are read, by ReaderOptions::labels: a label the
// rule rejects makes its record bad (an Error naming the file, the line or
// record, and the value; or skipped and counted with skip_bad_records).
#ifndef KEEL_IO_READERS_H_
#define KEEL_IO_READERS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "io/batch.h"
#include "io/input_split.h"

namespace keel {

enum class DataFormat { kLibsvm, kCsv, kRecordIO };

// What a label must be: the predictor type's rule.
enum class LabelRule {
  kFinite,   // regression: any finite number
  kBinary,   // 0 or 1; -1 is read as 0 and +1 as 1 (LIBLINEAR's convention)
  kClassId,  // an integer in 0..num_classes-1
};

// "libsvm", "csv", "recordio-protobuf" (also "recordio"), or the SageMaker
// content types "text/libsvm", "text/csv", "application/x-recordio-protobuf".
// Throws Error naming the accepted names.
DataFormat ParseDataFormat(const std::string& name);
// The canonical name: "libsvm", "csv" or "recordio-protobuf".
const char* DataFormatName(DataFormat format);

struct ReaderOptions {
  DataFormat format = DataFormat::kLibsvm;
  // libsvm: indices start at 0. By default they start at 1 (the svmlight
  // convention) and are shifted to 0-based; index 0 is then a bad record.
  bool zero_based = false;
  // Skip and count bad records instead of throwing.
  bool skip_bad_records = false;
  // When > 0, a feature index >= feature_dim (after shifting) is a bad record.
  uint64_t feature_dim = 0;
  // The labels' rule; num_classes bounds the class ids of kClassId.
  LabelRule labels = LabelRule::kFinite;
  int num_classes = 0;
  // Whether records carry a label (training data does). false, for scoring:
  // libsvm lines and CSV rows hold features only (CSV column j is feature j),
  // a recordIO record's label, if any, is ignored; every row gets label 0.
  bool labelled = true;
  // Bytes per read(2). Lines and records longer than this still work (the
  // buffer grows); tests use small blocks to cross block boundaries often.
  size_t block_size = size_t{4} << 20;
};

// Reads the examples of one InputSplit: the records whose first byte lies in
// it. Not thread-safe; use one reader per thread.
class ExampleReader {
 public:
  virtual ~ExampleReader();

  // Appends up to `max_rows` examples to `*batch` and returns how many; 0
  // once the split is exhausted. Bad input throws Error naming the file and
  // line ("PATH:LINE: ...", lines counted from 1 at the file's start) for the
  // text formats, or the file and byte offset of the record ("PATH@OFFSET:
  // ...") for recordIO, unless skip_bad_records. A bad record adds nothing to
  // the batch (the rows appended before it stay). After an Error, Read may be
  // called again to go on with the next record.
  virtual size_t Read(size_t max_rows, Batch* batch) = 0;

  // Bad records skipped so far (with skip_bad_records).
  virtual uint64_t skipped_records() const = 0;
  // Input bytes consumed so far, from the split's first record on. For
  // well-formed input, the splits of a file read to their ends add up to the
  // file's size.
  virtual uint64_t bytes_read() const = 0;
};

// Whether the first record of `split` carries a label, for data to score:
// libsvm, unless its first token is a feature ("index:value"); CSV, unless its
// row has exactly `features` columns (the model's input width; 0: labelled);
// recordIO, if its label["values"] is there. A stream or an empty split:
// true. Throws Error if the file cannot be read.
bool FirstRecordLabelled(const InputSplit& split, const ReaderOptions& options, uint64_t features);

// Opens a reader of `split` in `options.format`. Throws Error if the file
// cannot be opened; opening a FIFO blocks until a writer opens it.
std::unique_ptr<ExampleReader> OpenReader(const InputSplit& split, const ReaderOptions& options);

}  // namespace keel

#endif  // KEEL_IO_READERS_H_
