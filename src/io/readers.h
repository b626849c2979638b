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

#include "io/example_reader.h"
#include "io/input_split.h"

namespace keel {

// "libsvm", "csv", "recordio-protobuf" (also "recordio"), or the SageMaker
// content types "text/libsvm", "text/csv", "application/x-recordio-protobuf".
// Throws Error naming the accepted names.
DataFormat ParseDataFormat(const std::string& name);
// The canonical name: "libsvm", "csv" or "recordio-protobuf".
const char* DataFormatName(DataFormat format);

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
