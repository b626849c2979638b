#include "worker/push_filter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "base/error.h"

namespace keel {

double WholeShareWithKeyCache(int width, size_t bytes_per_value) {
  const double values = static_cast<double>(width) * static_cast<double>(bytes_per_value);
  return values / (static_cast<double>(sizeof(Key)) + values);
}

PushFilter::PushFilter(const PushFilterOptions& options, int width)
    : options_(options), width_(static_cast<size_t>(std::max(width, 0))) {
  if (!std::isfinite(options.threshold) || options.threshold < 0) {
    throw MakeError("push filter threshold ", options.threshold,
                    ": must be a finite number, at least 0");
  }
  if (width <= 0) throw MakeError("push filter: row width ", width, " must be at least 1");
  if (options.max_rows == 0 || options.max_rows > size_t{std::numeric_limits<uint32_t>::max()}) {
    throw MakeError("push filter: max_rows ", options.max_rows, " must be in [1, 2^32 - 1]");
  }
}

bool PushFilter::Passes(const float* row) const {
  for (size_t j = 0; j < width_; ++j) {
    if (std::fabs(row[j]) >= options_.threshold) return true;
  }
  return false;
}

void PushFilter::Release(Key key, uint32_t row) {
  free_rows_.push_back(row);
  slots_.erase(key);
}

bool PushFilter::Filter(const SharedArray<const Key>& keys, const std::vector<float>& gradients,
                        std::vector<Key>* sent_keys, std::vector<float>* sent_values) {
  const size_t rows = keys.size();
  if (gradients.size() != rows * width_) {
    throw MakeError("push filter: ", gradients.size(), " gradient values for ", rows,
                    " keys of width ", width_);
  }
  rows_given_ += rows;
  sent_keys->clear();
  sent_values->clear();
  if (!enabled()) {
    sent_keys->assign(keys.begin(), keys.end());
    sent_values->assign(gradients.begin(), gradients.end());
    rows_sent_ += rows;
    return true;
  }
  // First the sums and which rows go; nothing changes until the choice
  // between a subset and the whole minibatch is made.
  constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  std::vector<float> sums(gradients.begin(), gradients.end());
  std::vector<uint32_t> kept(rows, kNone);  // each row's remainder in values_
  std::vector<char> goes(rows, 0);
  size_t going = 0;
  size_t room = options_.max_rows - std::min(options_.max_rows, slots_.size());
  for (size_t i = 0; i < rows; ++i) {
    float* sum = &sums[i * width_];
    const auto slot = slots_.find(keys[i]);
    if (slot != slots_.end()) {
      kept[i] = slot->second;
      const float* remainder = &values_[size_t{slot->second} * width_];
      for (size_t j = 0; j < width_; ++j) sum[j] += remainder[j];
    }
    if (Passes(sum)) {
      goes[i] = 1;
    } else if (kept[i] == kNone) {
      // A new remainder: only while there is room for one.
      if (room > 0) {
        --room;
      } else {
        goes[i] = 1;
      }
    }
    going += static_cast<size_t>(goes[i]);
  }
  const bool whole = static_cast<double>(going) > options_.whole_share * static_cast<double>(rows);
  for (size_t i = 0; i < rows; ++i) {
    const float* sum = &sums[i * width_];
    uint32_t row = kept[i];
    if (whole || goes[i]) {
      if (row != kNone) Release(keys[i], row);
      if (!whole) {
        sent_keys->push_back(keys[i]);
        sent_values->insert(sent_values->end(), sum, sum + width_);
      }
      continue;
    }
    if (row == kNone) {
      if (!free_rows_.empty()) {
        row = free_rows_.back();
        free_rows_.pop_back();
      } else {
        row = static_cast<uint32_t>(values_.size() / width_);
        values_.resize(values_.size() + width_);
      }
      slots_.emplace(keys[i], row);
    }
    std::copy(sum, sum + width_, &values_[size_t{row} * width_]);
  }
  if (whole) {
    sent_keys->assign(keys.begin(), keys.end());
    *sent_values = std::move(sums);
    going = rows;
  }
  rows_sent_ += going;
  return whole;
}

void PushFilter::Flush(std::vector<Key>* keys, std::vector<float>* values) {
  keys->clear();
  values->clear();
  keys->reserve(slots_.size());
  for (const auto& [key, row] : slots_) keys->push_back(key);
  std::sort(keys->begin(), keys->end());
  values->reserve(keys->size() * width_);
  for (const Key key : *keys) {
    const float* remainder = &values_[size_t{slots_.at(key)} * width_];
    values->insert(values->end(), remainder, remainder + width_);
  }
  slots_.clear();
  free_rows_.clear();
  values_.clear();
  values_.shrink_to_fit();
}

void PushFilter::FlushInto(std::vector<Key>* keys, std::vector<float>* values) {
  if (slots_.empty()) return;
  std::vector<Key> held;
  std::vector<float> held_values;
  Flush(&held, &held_values);
  std::vector<Key> merged_keys;
  std::vector<float> merged_values;
  merged_keys.reserve(keys->size() + held.size());
  merged_values.reserve(values->size() + held_values.size());
  size_t a = 0, b = 0;
  while (a < keys->size() || b < held.size()) {
    const bool from_held = a == keys->size() || (b < held.size() && held[b] < (*keys)[a]);
    if (!from_held && b < held.size() && held[b] == (*keys)[a]) {
      throw MakeError("push filter: key ", held[b], " is both sent and held back");
    }
    const float* row = from_held ? &held_values[b * width_] : &(*values)[a * width_];
    merged_keys.push_back(from_held ? held[b++] : (*keys)[a++]);
    merged_values.insert(merged_values.end(), row, row + width_);
  }
  *keys = std::move(merged_keys);
  *values = std::move(merged_values);
}

}  // namespace keel
