// SageMaker's recordIO-protobuf format (io/readers.h): RecordIO records
// (io/recordio.h) holding aialgs.data.Records, parsed on an arena.
#include <google/protobuf/arena.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "base/error.h"
#include "io/format_readers.h"
#include "io/recordio.h"
#include "record.pb.h"

namespace keel {
namespace {

// SageMaker's recordIO-protobuf: RecordIO records holding aialgs.data.Records.
class RecordIOExampleReader : public ExampleReader {
 public:
  RecordIOExampleReader(const InputSplit& split, const ReaderOptions& options)
      : options_(options), records_(split, options.block_size), arena_(MakeArenaOptions()) {}

  size_t Read(size_t max_rows, Batch* batch) override {
    size_t rows = 0;
    std::string_view payload;
    while (rows < max_rows) {
      try {
        if (!records_.ReadRecord(&payload)) break;
      } catch (const RecordIOFramingError&) {
        if (!options_.skip_bad_records) throw;
        ++skipped_records_;
        continue;
      }
      if (AppendRecord(payload, batch)) {
        ++rows;
      } else if (options_.skip_bad_records) {
        ++skipped_records_;
      } else {
        throw MakeError(records_.path(), "@", records_.record_offset(), ": ", problem_);
      }
    }
    return rows;
  }

  uint64_t skipped_records() const override { return skipped_records_; }
  uint64_t bytes_read() const override { return records_.bytes_read(); }

 private:
  static google::protobuf::ArenaOptions MakeArenaOptions() {
    google::protobuf::ArenaOptions options;
    options.start_block_size = size_t{64} << 10;
    options.max_block_size = size_t{1} << 20;
    return options;
  }

  // The float32 tensor `name`["values"] of `map`, or null with problem_ set.
  const aialgs::data::Float32Tensor* FindTensor(
      const google::protobuf::Map<std::string, aialgs::data::Value>& map, const char* name) {
    const auto found = map.find(values_key_);
    if (found == map.end()) {
      problem_ = std::string("the record has no ") + name + "[\"values\"]";
      return nullptr;
    }
    if (!found->second.has_float32_tensor()) {
      problem_ = std::string(name) + "[\"values\"] is not a float32_tensor";
      return nullptr;
    }
    return &found->second.float32_tensor();
  }

  bool CheckFinite(const google::protobuf::RepeatedField<float>& values, const char* name) {
    for (int i = 0; i < values.size(); ++i) {
      if (!std::isfinite(values.Get(i))) {
        problem_ = std::string(name) + "[\"values\"][" + std::to_string(i) + "] is " +
                   std::to_string(values.Get(i)) + ", not finite";
        return false;
      }
    }
    return true;
  }

  // The product of a tensor's shape, saturating at UINT64_MAX.
  static uint64_t ShapeSize(const aialgs::data::Float32Tensor& tensor) {
    uint64_t size = 1;
    for (uint64_t dimension : tensor.shape()) {
      size = dimension != 0 && size > UINT64_MAX / dimension ? UINT64_MAX : size * dimension;
    }
    return size;
  }

  // Appends the example in `payload` to *batch; false with problem_ set if it is bad.
  bool AppendRecord(std::string_view payload, Batch* batch) {
    const aialgs::data::Record* record = ParseRecord(payload);
    if (record == nullptr) return false;
    const aialgs::data::Float32Tensor* features = FindTensor(record->features(), "features");
    if (features == nullptr) return false;
    const aialgs::data::Float32Tensor* label =
        options_.labelled ? FindTensor(record->label(), "label") : &NoLabel();
    if (label == nullptr) return false;
    if (!CheckFinite(features->values(), "features") || !CheckFinite(label->values(), "label")) {
      return false;
    }
    if (!CheckFeatureIndices(*features) || !CheckLabelWidth(*label)) return false;
    const size_t first_label = batch->labels.size();
    CheckBatchLabelWidth(batch);
    AppendExample(*features, *label, batch);
    if (!AllowLabels(batch, first_label)) {
      RemoveLastExample(first_label, batch);
      return false;
    }
    return true;
  }

  // What an unlabelled record gets: label 0.
  static const aialgs::data::Float32Tensor& NoLabel() {
    static const aialgs::data::Float32Tensor* const kZero = [] {
      auto* zero = new aialgs::data::Float32Tensor;
      zero->add_values(0.0f);
      return zero;
    }();
    return *kZero;
  }

  // Applies the label rule (io/readers.h) to the labels from `first` on; on
  // failure sets problem_. One branch for regression.
  bool AllowLabels(Batch* batch, size_t first) {
    if (options_.labels == LabelRule::kFinite) return true;
    for (size_t i = first; i < batch->labels.size(); ++i) {
      if (!CheckLabel(options_, &batch->labels[i], &problem_)) return false;
    }
    return true;
  }

  // Removes the example AppendExample added last, whose labels start at `first_label`.
  static void RemoveLastExample(size_t first_label, Batch* batch) {
    batch->row_offsets.pop_back();
    const size_t first_feature = batch->row_offsets.back();
    batch->labels.resize(first_label);
    batch->indices.resize(first_feature);
    batch->values.resize(first_feature);
  }

  // The record in `payload`, on the arena; null with problem_ set if it is not one.
  const aialgs::data::Record* ParseRecord(std::string_view payload) {
    if (arena_.SpaceUsed() > (size_t{4} << 20)) arena_.Reset();
    auto* record = google::protobuf::Arena::CreateMessage<aialgs::data::Record>(&arena_);
    if (payload.size() > INT_MAX || !record->ParseFromArray(payload.data(), payload.size())) {
      problem_ = "the payload is not a valid aialgs.data.Record protobuf";
      return nullptr;
    }
    return record;
  }

  // Values without keys are dense; no values at all is an empty (sparse) row.
  static bool IsSparse(const aialgs::data::Float32Tensor& features) {
    return features.keys_size() > 0;
  }

  // Whether the features' keys (or dense positions) match their values and
  // lie below feature_dim and the shape; sets problem_ if not.
  bool CheckFeatureIndices(const aialgs::data::Float32Tensor& features) {
    const auto count = static_cast<uint64_t>(features.values_size());
    const uint64_t shape_size = ShapeSize(features);
    const bool sparse = IsSparse(features);
    if (!sparse && count > 0 && features.shape_size() > 0 && shape_size != count) {
      problem_ = "dense features[\"values\"] has " + std::to_string(count) +
                 " values but its shape holds " + std::to_string(shape_size);
      return false;
    }
    if (sparse && static_cast<uint64_t>(features.keys_size()) != count) {
      problem_ = "sparse features[\"values\"] has " + std::to_string(features.keys_size()) +
                 " keys but " + std::to_string(count) + " values";
      return false;
    }
    uint64_t limit = options_.feature_dim > 0 ? options_.feature_dim : UINT64_MAX;
    if (sparse && features.shape_size() > 0) limit = std::min(limit, shape_size);
    const uint64_t largest_index =
        sparse ? *std::max_element(features.keys().begin(), features.keys().end()) : count - 1;
    if (count > 0 && largest_index >= limit) {
      problem_ = "feature index " + std::to_string(largest_index) + " is out of range: " +
                 (limit == options_.feature_dim ? "feature_dim is " : "the shape holds ") +
                 std::to_string(limit);
      return false;
    }
    return true;
  }

  // Whether the label has values, as many as the first good record's; sets
  // problem_ if not.
  bool CheckLabelWidth(const aialgs::data::Float32Tensor& label) {
    const auto width = static_cast<size_t>(label.values_size());
    if (width == 0) {
      problem_ = "label[\"values\"] is empty";
      return false;
    }
    if (label_width_ == 0) label_width_ = width;
    if (width != label_width_) {
      problem_ = "the label has " + std::to_string(width) + " values, the first record's has " +
                 std::to_string(label_width_);
      return false;
    }
    return true;
  }

  // Sets an empty batch's label width; throws Error if a batch with rows has another.
  void CheckBatchLabelWidth(Batch* batch) const {
    if (batch->rows() == 0) {
      batch->label_width = static_cast<int>(label_width_);
    } else if (static_cast<size_t>(batch->label_width) != label_width_) {
      throw MakeError(records_.path(), ": cannot add rows with ", label_width_,
                      " labels to a batch with ", batch->label_width, " labels per row");
    }
  }

  static void AppendExample(const aialgs::data::Float32Tensor& features,
                            const aialgs::data::Float32Tensor& label, Batch* batch) {
    batch->labels.insert(batch->labels.end(), label.values().begin(), label.values().end());
    if (IsSparse(features)) {
      batch->indices.insert(batch->indices.end(), features.keys().begin(), features.keys().end());
    } else {
      const auto count = static_cast<uint64_t>(features.values_size());
      for (uint64_t i = 0; i < count; ++i) batch->indices.push_back(i);
    }
    batch->values.insert(batch->values.end(), features.values().begin(), features.values().end());
    batch->row_offsets.push_back(batch->indices.size());
  }

  const ReaderOptions options_;
  RecordIOReader records_;
  google::protobuf::Arena arena_;
  const std::string values_key_ = "values";
  std::string problem_;
  size_t label_width_ = 0;  // of the first good record; 0 until then
  uint64_t skipped_records_ = 0;
};

}  // namespace

std::unique_ptr<ExampleReader> OpenRecordIOExampleReader(const InputSplit& split,
                                                         const ReaderOptions& options) {
  return std::make_unique<RecordIOExampleReader>(split, options);
}

}  // namespace keel
