// ControlTable: small job-wide counts and flags the workers share through the
// servers' control table (kControlTable): the early-stopping decision and the
// staleness gate's figures.
//
// A value is kept as two floats of 20 bits each, so sums of counts below 2^40
// stay exact in float. Not safe for concurrent use: the trainer's thread calls
// it.
#ifndef KEEL_WORKER_CONTROL_TABLE_H_
#define KEEL_WORKER_CONTROL_TABLE_H_

#include <cstdint>

#include "kv/kv_worker.h"

namespace keel {

class ControlTable {
 public:
  // Control keys (feature indices in the control table).
  static constexpr uint64_t kStopFeature = 1;            // > 0: the leader decided to stop early
  static constexpr uint64_t kGateFeature = 100000;       // + figure: the gate report (GateReport)
  static constexpr uint64_t kEpochLossFeature = 200000;  // + 2 epoch (+ 1): training loss
  static constexpr uint64_t kModelLossFeature = 10000000;  // + epoch x 32 + model: its loss

  explicit ControlTable(KVWorker* client) : client_(client) {}

  // Adds `value` to key `feature` on the servers. Blocks until applied.
  // Throws Error if the request fails.
  void Add(uint64_t feature, uint64_t value);
  // The sum of every Add to key `feature` so far. Blocks; throws Error if the
  // request fails.
  uint64_t Read(uint64_t feature);

  // The same for a real number, summed as a float on the servers (about 7
  // significant digits). A key takes either Add or AddReal, never both.
  void AddReal(uint64_t feature, double value);
  double ReadReal(uint64_t feature);

 private:
  KVWorker* client_;
};

}  // namespace keel

#endif  // KEEL_WORKER_CONTROL_TABLE_H_
