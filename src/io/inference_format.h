// Inference formats: the request and response bodies of SageMaker's
// inference contract, which `keel serve` answers and `keel predict` writes.
//
// Requests (features only, no labels), by Content-Type:
// - text/csv: a record per line, its features comma-separated (column j is
//   feature j).
// - text/libsvm (also text/x-libsvm): a record per line, "index:value" tokens;
//   a leading label, if any, is ignored.
// - application/json: {"instances": [INSTANCE, ...]} (or one INSTANCE alone,
//   or a bare array of them), where an INSTANCE is {"features": FEATURES},
//   {"data": {"features": FEATURES}} or FEATURES itself, and FEATURES is an
//   array of numbers (dense) or SageMaker's sparse form {"keys": [...],
//   "values": [...], "shape": [N]} (keys 0-based; shape optional).
// - application/jsonlines (also application/x-jsonlines, application/jsonl):
//   an INSTANCE per line.
// - application/x-recordio-protobuf: RecordIO records (io/recordio.h) holding
//   aialgs.data.Records whose features["values"] is a float32 tensor (dense, or
//   sparse with keys); a label, if any, is ignored.
// Every feature value must be a finite number. With a model's input width
// (`input_dim` > 0), a dense record must have exactly that many features and a
// sparse index must be below it; 0 leaves both unchecked (a sparse model whose
// feature space has no bound).
//
// Responses, by the Accept header: application/json {"predictions": [P, ...]},
// application/jsonlines a P per line, where P is {"score": S,
// "predicted_label": L} for a binary classifier, {"score": [S0, S1, ...],
// "predicted_label": L} for a multiclass one and {"score": S} for a regressor;
// application/x-recordio-protobuf a Record per prediction with label["score"]
// (and label["predicted_label"]) float32 tensors; text/csv "L,S" / "L,S0,S1,..."
// / "S" per line (what `keel predict` always wrote).
#ifndef KEEL_IO_INFERENCE_FORMAT_H_
#define KEEL_IO_INFERENCE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "io/batch.h"

namespace keel {

enum class InferenceFormat { kCsv, kLibsvm, kJson, kJsonLines, kRecordIO };

// The canonical content type: "text/csv", "text/libsvm", "application/json",
// "application/jsonlines", "application/x-recordio-protobuf".
const char* ContentTypeOf(InferenceFormat format);

// A request the client must change: answered 400 (bad records), 406 (no
// acceptable response type) or 415 (unsupported content type).
class InferenceRequestError : public Error {
 public:
  InferenceRequestError(int status, const std::string& message) : Error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// The format of a Content-Type header value (parameters such as "; charset=..."
// and case ignored). Throws InferenceRequestError 415 naming the supported types.
InferenceFormat ParseContentType(const std::string& content_type);

// The response format an Accept header asks for: the first listed type (in
// order of q-value, then of appearance) that is supported; "*/*",
// "application/*" or an empty header give `fallback`. Throws
// InferenceRequestError 406 naming the supported types when none is.
InferenceFormat ParseAccept(const std::string& accept, InferenceFormat fallback);

// The name --accept takes for each format: "csv", "libsvm", "json", "jsonlines",
// "recordio" (also the content types themselves). Throws Error naming the names.
InferenceFormat ParseFormatName(const std::string& name);

struct InferenceInput {
  // Features per dense record, and the bound on sparse indices; 0: unchecked.
  uint64_t input_dim = 0;
  // text/libsvm: indices start at 0 (else at 1, shifted to 0-based).
  bool libsvm_zero_based = false;
};

// Appends the records of `body` to *batch, each with label 0 (an empty batch
// gets label width 1). Throws InferenceRequestError 400 "record N: PROBLEM"
// (records counted from 1 in the body; for the line formats also its line:
// "record N (line L): ..."; JSON syntax by byte offset), leaving *batch as it
// was before the call: a request is taken whole or not at all. An empty body
// is no records; a UTF-8 byte order mark before a text body is skipped. A
// recordIO record without values is an empty row, as training reads it.
void DecodeRecords(InferenceFormat format, std::string_view body, const InferenceInput& input,
                   Batch* batch);

// What a model predicted for some records.
struct Predictions {
  enum class Kind { kBinary, kMulticlass, kRegressor };
  Kind kind = Kind::kBinary;
  int width = 1;              // scores per record: the classes of a multiclass model, else 1
  std::vector<float> scores;  // records x width
  std::vector<int> labels;    // per record; unused for a regressor
  size_t records() const { return scores.size() / static_cast<size_t>(width); }
};

// Appends the predictions' response body in `format` to *out. Scores are
// written with 7 significant digits in the text formats (as float32 in
// recordIO); a non-finite score (a regressor's overflow) is null in JSON,
// "inf" or "nan" in CSV. text/libsvm is not a response type: Error.
void EncodePredictions(InferenceFormat format, const Predictions& predictions, std::string* out);

class RecordIOWriter;  // io/recordio.h

// Writes the predictions of many batches to a stream as one response body
// (one JSON document, not one per batch), holding at most about a megabyte
// (or one record) in memory: what `keel predict` writes. Not thread-safe.
class PredictionWriter {
 public:
  // `out` must outlive the writer. Throws Error for text/libsvm.
  PredictionWriter(InferenceFormat format, std::ostream* out);
  ~PredictionWriter();
  PredictionWriter(const PredictionWriter&) = delete;
  PredictionWriter& operator=(const PredictionWriter&) = delete;

  // Appends the predictions' records. Throws Error if writing fails.
  void Write(const Predictions& predictions);
  // Ends the body (JSON's closing brackets) and flushes. Throws Error if
  // writing fails.
  void Finish();

 private:
  static constexpr size_t kFlushBytes = size_t{1} << 20;
  void Flush();

  InferenceFormat format_;
  std::ostream* out_;
  std::unique_ptr<RecordIOWriter> recordio_;
  std::string buffer_;
  size_t written_ = 0;  // records so far
};

}  // namespace keel

#endif  // KEEL_IO_INFERENCE_FORMAT_H_
