#include "worker/training_loss.h"

#include <algorithm>

#include "worker/hyperparameters.h"

namespace keel {
namespace {

// Epoch e's loss sum is at kEpochLossFeature + 2e, its example count at the
// next key.
uint64_t LossKey(int epoch) {
  return ControlTable::kEpochLossFeature + 2 * static_cast<uint64_t>(epoch);
}
uint64_t ExamplesKey(int epoch) { return LossKey(epoch) + 1; }
// Model k's (k >= 1) loss sum of epoch e: at kModelLossFeature + e x
// kMaxModels + k.
uint64_t ModelLossKey(int epoch, int k) {
  return ControlTable::kModelLossFeature + static_cast<uint64_t>(epoch) * kMaxModels +
         static_cast<uint64_t>(k);
}

}  // namespace

void AddLosses(const ModelLosses& add, ModelLosses* sum) {
  if (sum->size() < add.size()) sum->resize(add.size(), 0.0);
  for (size_t k = 0; k < add.size(); ++k) (*sum)[k] += add[k];
}

void AddEpochLoss(ControlTable* control, int epoch, const ModelLosses& losses, uint64_t examples) {
  control->AddReal(LossKey(epoch), losses.empty() ? 0.0 : losses[0]);
  for (size_t k = 1; k < losses.size(); ++k) {
    control->AddReal(ModelLossKey(epoch, static_cast<int>(k)), losses[k]);
  }
  control->Add(ExamplesKey(epoch), examples);
}

ModelLosses ReadEpochLosses(ControlTable* control, int epoch, int num_models) {
  ModelLosses losses(static_cast<size_t>(std::max(num_models, 1)), 0.0);
  const uint64_t examples = control->Read(ExamplesKey(epoch));
  if (examples == 0) return losses;
  losses[0] = control->ReadReal(LossKey(epoch)) / static_cast<double>(examples);
  for (int k = 1; k < num_models; ++k) {
    losses[k] = control->ReadReal(ModelLossKey(epoch, k)) / static_cast<double>(examples);
  }
  return losses;
}

}  // namespace keel
