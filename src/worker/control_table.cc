#include "worker/control_table.h"

#include <cmath>
#include <vector>

#include "worker/hyperparameters.h"

namespace keel {
namespace {

// Counts travel as two floats of 20 bits each: exact in float.
constexpr uint64_t kCountBits = 20;

}  // namespace

void ControlTable::Add(uint64_t feature, uint64_t value) {
  const float low = static_cast<float>(value & ((1u << kCountBits) - 1));
  const float high = static_cast<float>(value >> kCountBits);
  SharedArray<const Key> key(std::vector<Key>{MixKey(feature)});
  // The control table runs SGD at rate 1: pushing -x adds x.
  client_->Wait(client_->Push(key, SharedArray<const float>(std::vector<float>{-low, -high}),
                              kControlTableWidth, kControlTable));
}

uint64_t ControlTable::Read(uint64_t feature) {
  SharedArray<const Key> key(std::vector<Key>{MixKey(feature)});
  SharedArray<float> value;
  client_->Wait(client_->Pull(key, &value, kControlTableWidth, kControlTable));
  return static_cast<uint64_t>(std::llround(value[0])) +
         (static_cast<uint64_t>(std::llround(value[1])) << kCountBits);
}

void ControlTable::AddReal(uint64_t feature, double value) {
  SharedArray<const Key> key(std::vector<Key>{MixKey(feature)});
  client_->Wait(client_->Push(
      key, SharedArray<const float>(std::vector<float>{-static_cast<float>(value), 0.0f}),
      kControlTableWidth, kControlTable));
}

double ControlTable::ReadReal(uint64_t feature) {
  SharedArray<const Key> key(std::vector<Key>{MixKey(feature)});
  SharedArray<float> value;
  client_->Wait(client_->Pull(key, &value, kControlTableWidth, kControlTable));
  return value[0];
}

}  // namespace keel
