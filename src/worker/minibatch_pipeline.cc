#include "worker/minibatch_pipeline.h"

#include <algorithm>
#include <utility>

#include "base/time.h"
#include "kv/wire_precision.h"
#include "worker/hyperparameters.h"

namespace keel {
namespace {

// `filter` for `client`'s pushes of rows `width` wide: with key caching, a
// minibatch goes whole when a subset's keys would cost more than the values
// it leaves out (PushFilterOptions::whole_share).
PushFilterOptions ForClient(PushFilterOptions filter, const KVWorker& client, int width) {
  if (client.key_cache()) {
    filter.whole_share = std::min(
        filter.whole_share, WholeShareWithKeyCache(width, BytesPerValue(client.wire_precision())));
  }
  return filter;
}

}  // namespace

MinibatchPipeline::MinibatchPipeline(KVWorker* client, ComputeBackend* model,
                                     const SharedArray<const Key>& bias_key, bool use_bias,
                                     int depth, const PushFilterOptions& filter)
    : client_(client),
      model_(model),
      bias_key_(bias_key),
      use_bias_(use_bias),
      width_(model->weight_width()),
      bias_width_(model->bias_width()),
      depth_(static_cast<size_t>(std::max(depth, 1))),
      slots_(depth_ + 1),
      zero_bias_(model->bias_width(), 0.0f),
      filter_(ForClient(filter, *client, model->weight_width()), model->weight_width()) {}

void MinibatchPipeline::StartPulls(Slot* slot) {
  slot->pull_clock = client_->clock();
  slot->weights_pull = client_->Pull(slot->batch.keys, &slot->weights, width_, kWeightTable,
                                     /*sent_again=*/true);
  if (use_bias_) slot->bias_pull = client_->Pull(bias_key_, &slot->bias, bias_width_, kBiasTable);
}

bool MinibatchPipeline::ReadNext(BatchStream* stream, PreparedBatch* batch) {
  const double begin = MonotonicSeconds();
  const bool have = stream->Next(batch);
  read_seconds_ += MonotonicSeconds() - begin;
  return have;
}

bool MinibatchPipeline::Start(BatchStream* stream) {
  const bool have = ReadNext(stream, &slots_[current_].batch);
  if (have) StartPulls(&slots_[current_]);
  return have;
}

bool MinibatchPipeline::StartNext(BatchStream* stream, const EpochClock& clock,
                                  uint64_t current) {
  while (ahead_ < depth_ && !stream_done_) {
    Slot& slot = slots_[SlotAfter(current_, ahead_ + 1)];
    if (!ReadNext(stream, &slot.batch)) {
      stream_done_ = true;
      break;
    }
    client_->set_clock(clock.After(current + 1 + ahead_));
    StartPulls(&slot);
    ++ahead_;
  }
  client_->set_clock(clock.After(current + 1));
  if (ahead_ == 0) return false;
  // Each minibatch is prefetched once: when it is the next one.
  model_->Prefetch(slots_[SlotAfter(current_)].batch);
  return true;
}

void MinibatchPipeline::Advance() {
  current_ = SlotAfter(current_);
  if (ahead_ > 0) --ahead_;
}

void MinibatchPipeline::WaitForRows() {
  Slot& now = slots_[current_];
  client_->Wait(now.weights_pull);
  if (use_bias_) client_->Wait(now.bias_pull);
}

double MinibatchPipeline::ComputeGradients() {
  Slot& now = slots_[current_];
  return model_->Gradients(now.batch, now.weights.data(),
                           use_bias_ ? now.bias.data() : zero_bias_.data(), &weight_gradients_,
                           &bias_gradient_);
}

MinibatchGradients MinibatchPipeline::GradientHealth() const {
  MinibatchGradients figures;
  figures[0] = MeasureGradients(weight_gradients_.data(), weight_gradients_.size());
  if (use_bias_) figures[1] = MeasureGradients(bias_gradient_.data(), bias_gradient_.size());
  return figures;
}

std::vector<MinibatchGradients> MinibatchPipeline::ModelGradientHealth(int models) const {
  const size_t n = static_cast<size_t>(std::max(models, 1));
  std::vector<MinibatchGradients> figures(n);
  const std::vector<GradientFigures> weights =
      MeasureModelColumns(weight_gradients_, static_cast<size_t>(width_), n);
  const std::vector<GradientFigures> bias =
      use_bias_ ? MeasureModelColumns(bias_gradient_, static_cast<size_t>(bias_width_), n)
                : std::vector<GradientFigures>(n);
  for (size_t k = 0; k < n; ++k) figures[k] = {weights[k], bias[k]};
  return figures;
}

void MinibatchPipeline::ZeroModel(int k, int models) {
  const size_t n = static_cast<size_t>(std::max(models, 1));
  const auto zero = [&](std::vector<float>* values, size_t width) {
    const size_t columns = width / n, first = static_cast<size_t>(k) * columns;
    for (size_t row = 0; row + width <= values->size(); row += width) {
      std::fill_n(values->begin() + static_cast<std::ptrdiff_t>(row + first), columns, 0.0f);
    }
  };
  zero(&weight_gradients_, static_cast<size_t>(width_));
  zero(&bias_gradient_, static_cast<size_t>(bias_width_));
}

void MinibatchPipeline::MakeRoomForPush() {
  while (pushes_.size() >= depth_) {
    WaitFor(pushes_.front());
    pushes_.pop_front();
  }
}

void MinibatchPipeline::PushGradients(int64_t clock, bool flush) {
  MakeRoomForPush();
  Pushes pushes;
  client_->set_clock(clock);
  if (use_bias_) {
    pushes.bias = client_->Push(bias_key_, SharedArray<const float>(std::move(bias_gradient_)),
                                bias_width_, kBiasTable, slots_[current_].pull_clock);
  }
  pushes_.push_back(pushes);  // the weights' handle below, once it exists
  // The pull's own key list unless the filter holds rows back (a list
  // the servers may keep: key caching).
  SharedArray<const Key> keys = slots_[current_].batch.keys;
  SharedArray<const float> values;
  if (filter_.enabled()) {
    std::vector<Key> sent_keys;
    std::vector<float> sent_values;
    bool whole = filter_.Filter(keys, weight_gradients_, &sent_keys, &sent_values);
    if (flush && filter_.remainder_rows() > 0) {
      filter_.FlushInto(&sent_keys, &sent_values);
      whole = false;
    }
    if (!whole) keys = SharedArray<const Key>(std::move(sent_keys));
    values = SharedArray<const float>(std::move(sent_values));
  } else {
    values = SharedArray<const float>(std::move(weight_gradients_));
  }
  // Every row held back: the gate learns the clock from the announcement.
  if (!keys.empty()) {
    pushes_.back().weights =
        client_->Push(keys, values, width_, kWeightTable, slots_[current_].pull_clock);
  }
  weight_gradients_ = {};
  bias_gradient_ = {};
}

void MinibatchPipeline::FlushRemainders() {
  if (filter_.remainder_rows() == 0) return;
  std::vector<Key> keys;
  std::vector<float> values;
  filter_.Flush(&keys, &values);
  MakeRoomForPush();
  // Sums over minibatches read at several clocks: the step is not scaled.
  Pushes pushes;
  pushes_.push_back(pushes);
  pushes_.back().weights =
      client_->Push(SharedArray<const Key>(std::move(keys)),
                    SharedArray<const float>(std::move(values)), width_, kWeightTable);
}

void MinibatchPipeline::WaitFor(const Pushes& pushes) {
  if (pushes.bias) client_->Wait(pushes.bias);
  if (pushes.weights) client_->Wait(pushes.weights);
}

void MinibatchPipeline::WaitForPushes() {
  FlushRemainders();
  while (!pushes_.empty()) {
    WaitFor(pushes_.front());
    pushes_.pop_front();
  }
}

void MinibatchPipeline::CancelAll() {
  for (Slot& slot : slots_) {
    if (slot.weights_pull) client_->Cancel(slot.weights_pull);
    if (slot.bias_pull) client_->Cancel(slot.bias_pull);
  }
  for (const Pushes& pushes : pushes_) {
    if (pushes.bias) client_->Cancel(pushes.bias);
    if (pushes.weights) client_->Cancel(pushes.weights);
  }
}

}  // namespace keel
