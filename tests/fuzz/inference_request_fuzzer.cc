// Fuzzes DecodeRecords (io/inference_format.h), the decoding of `keel serve`'s
// request bodies, over all five request formats. The first input byte picks
// the format (byte % 5), libsvm's indexing (bit 0 of byte / 5) and the model's
// input width (bits 1-2 of byte / 5: 0, 1, 3 or 100); the rest is the body.
//
// The body is decoded into a batch that already holds a row, as a server's
// batch may. Bad input must throw InferenceRequestError with status 400 and
// leave the batch exactly as it was; any other exception is a finding (its
// message printed, then abort). Accepted input must make a well-formed batch: consistent CSR
// arrays, labels 0, finite values, and with an input width every index below
// it.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "fuzz_util.h"
#include "io/batch.h"
#include "io/inference_format.h"

namespace {

bool SameBatch(const keel::Batch& a, const keel::Batch& b) {
  return a.labels == b.labels && a.row_offsets == b.row_offsets && a.indices == b.indices &&
         a.values == b.values && a.label_width == b.label_width;
}

// The invariants of a batch DecodeRecords filled.
bool WellFormed(const keel::Batch& batch, uint64_t input_dim) {
  if (batch.label_width != 1 || batch.row_offsets.empty() || batch.row_offsets[0] != 0) {
    return false;
  }
  if (batch.labels.size() != batch.rows() || batch.indices.size() != batch.values.size() ||
      batch.row_offsets.back() != batch.indices.size()) {
    return false;
  }
  for (size_t r = 0; r < batch.rows(); ++r) {
    if (batch.row_offsets[r] > batch.row_offsets[r + 1] || batch.labels[r] != 0) return false;
  }
  for (size_t i = 0; i < batch.nnz(); ++i) {
    if (!std::isfinite(batch.values[i])) return false;
    if (input_dim > 0 && batch.indices[i] >= input_dim) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  keel::fuzz::QuietLogging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr keel::InferenceFormat kFormats[] = {
      keel::InferenceFormat::kCsv, keel::InferenceFormat::kLibsvm, keel::InferenceFormat::kJson,
      keel::InferenceFormat::kJsonLines, keel::InferenceFormat::kRecordIO};
  static constexpr uint64_t kInputDims[] = {0, 1, 3, 100};
  const keel::InferenceFormat format = kFormats[data[0] % 5];
  const unsigned settings = data[0] / 5;
  keel::InferenceInput input;
  input.libsvm_zero_based = (settings & 1) != 0;
  input.input_dim = kInputDims[(settings >> 1) % 4];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);

  keel::Batch batch;
  const uint64_t index = 0;
  const float value = 1;
  batch.AddRow(0, &index, &value, 1);
  const keel::Batch before = batch;
  try {
    keel::DecodeRecords(format, body, input, &batch);
  } catch (const keel::InferenceRequestError& error) {
    if (error.status() != 400 || !SameBatch(batch, before)) __builtin_trap();
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "DecodeRecords threw %s\n", error.what());
    std::abort();
  }
  if (!WellFormed(batch, input.input_dim)) __builtin_trap();
  return 0;
}
