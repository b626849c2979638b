// How long a training job's workers wait for each other at a barrier (and at
// a checkpoint, or for the end of an epoch's orphaned shares): a day, since a
// barrier waits for the slowest worker's whole share of an epoch.
#ifndef KEEL_WORKER_BARRIERS_H_
#define KEEL_WORKER_BARRIERS_H_

namespace keel {

constexpr double kBarrierTimeoutS = 24 * 3600;

}  // namespace keel

#endif  // KEEL_WORKER_BARRIERS_H_
