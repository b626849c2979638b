// ExampleReader: the interface of a data format's reader (one InputSplit
// read into minibatches, keel::Batch), and ReaderOptions, how to read. The
// formats, and OpenReader, which opens the reader of a format: io/readers.h;
// the readers themselves: io/format_readers.h.
#ifndef KEEL_IO_EXAMPLE_READER_H_
#define KEEL_IO_EXAMPLE_READER_H_

#include <cstddef>
#include <cstdint>

#include "io/batch.h"

namespace keel {

enum class DataFormat { kLibsvm, kCsv, kRecordIO };

// What a label must be: the predictor type's rule.
enum class LabelRule {
  kFinite,   // regression: any finite number
  kBinary,   // 0 or 1; -1 is read as 0 and +1 as 1 (LIBLINEAR's convention)
  kClassId,  // an integer in 0..num_classes-1
};

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
  // A share of the rows held out of training (0: none): a row is held out
  // when a hash of its label and its non-zero entries (index and value)
  // falls below holdout_share, so the same rows are held out however the
  // channel is split among workers and whatever its format (a zero written
  // out, as in CSV, and one left out hash alike). The reader yields only the
  // held-out rows (holdout_side) or only the others.
  double holdout_share = 0.0;
  bool holdout_side = false;
};

// Whether row `row` of `batch` is among `share` of rows held out (see
// ReaderOptions::holdout_share).
bool HeldOut(const Batch& batch, size_t row, double share);

// Reads the examples of one InputSplit: the records whose first byte lies in
// it. Not thread-safe; use one reader per thread.
class ExampleReader {
 public:
  virtual ~ExampleReader() = default;

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

}  // namespace keel

#endif  // KEEL_IO_EXAMPLE_READER_H_
