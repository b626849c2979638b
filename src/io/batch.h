// Batch: a minibatch of examples in compressed sparse row (CSR) form.
//
// Row r has features indices[row_offsets[r] .. row_offsets[r + 1]) with the
// matching values, and labels[r * label_width .. (r + 1) * label_width).
// Feature indices are the raw indices of the data (0-based after reading),
// not yet mixed into the key space. Dense data (CSV, dense recordIO) is
// stored the same way, with every column present.
#ifndef KEEL_IO_BATCH_H_
#define KEEL_IO_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/error.h"

namespace keel {

struct Batch {
  std::vector<float> labels;
  std::vector<uint64_t> row_offsets = {0};
  std::vector<uint64_t> indices;
  std::vector<float> values;
  int label_width = 1;

  size_t rows() const { return row_offsets.size() - 1; }
  size_t nnz() const { return indices.size(); }
  // The memory its arrays take (their capacities: a reader's grow as rows come).
  uint64_t memory_bytes() const {
    return labels.capacity() * sizeof(float) + row_offsets.capacity() * sizeof(uint64_t) +
           indices.capacity() * sizeof(uint64_t) + values.capacity() * sizeof(float);
  }
  void Clear() {
    labels.clear();
    row_offsets.assign(1, 0);
    indices.clear();
    values.clear();
  }
  // Appends one row: its label and its features.
  void AddRow(float label, const uint64_t* row_indices, const float* row_values, size_t count) {
    labels.push_back(label);
    indices.insert(indices.end(), row_indices, row_indices + count);
    values.insert(values.end(), row_values, row_values + count);
    row_offsets.push_back(indices.size());
  }
  // Appends rows [first, first + count) of `from`, whose label width must be
  // this batch's (any, if this batch has no row yet; Error otherwise, as a
  // reader's Read says).
  void AppendRows(const Batch& from, size_t first, size_t count) {
    if (rows() == 0) {
      label_width = from.label_width;
    } else if (from.label_width != label_width) {
      throw MakeError("cannot add rows with ", from.label_width, " labels to a batch with ",
                      label_width, " labels per row");
    }
    const size_t width = static_cast<size_t>(from.label_width);
    labels.insert(labels.end(), from.labels.begin() + first * width,
                  from.labels.begin() + (first + count) * width);
    const uint64_t begin = from.row_offsets[first];
    const uint64_t end = from.row_offsets[first + count];
    const uint64_t shift = indices.size() - begin;  // wraps, and wraps back below
    indices.insert(indices.end(), from.indices.begin() + begin, from.indices.begin() + end);
    values.insert(values.end(), from.values.begin() + begin, from.values.begin() + end);
    for (size_t r = first + 1; r <= first + count; ++r) {
      row_offsets.push_back(from.row_offsets[r] + shift);
    }
  }
};

}  // namespace keel

#endif  // KEEL_IO_BATCH_H_
