#include "worker/training_loss.h"

namespace keel {
namespace {

// Epoch e's loss sum is at kEpochLossFeature + 2e, its example count at the
// next key.
uint64_t LossKey(int epoch) {
  return ControlTable::kEpochLossFeature + 2 * static_cast<uint64_t>(epoch);
}
uint64_t ExamplesKey(int epoch) { return LossKey(epoch) + 1; }

}  // namespace

void AddEpochLoss(ControlTable* control, int epoch, double loss, uint64_t examples) {
  control->AddReal(LossKey(epoch), loss);
  control->Add(ExamplesKey(epoch), examples);
}

double ReadEpochLoss(ControlTable* control, int epoch) {
  const uint64_t examples = control->Read(ExamplesKey(epoch));
  if (examples == 0) return 0.0;
  return control->ReadReal(LossKey(epoch)) / static_cast<double>(examples);
}

}  // namespace keel
