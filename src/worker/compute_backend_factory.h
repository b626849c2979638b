// MakeComputeBackend: the ComputeBackend a --device names, "cpu" (CpuModel)
// or "cuda:N" (CudaModel), with several models wrapped as num_models asks.
//
// The one place that knows whether this build has the CUDA backend (its .cc
// alone is compiled with KEEL_HAVE_CUDA).
#ifndef KEEL_WORKER_COMPUTE_BACKEND_FACTORY_H_
#define KEEL_WORKER_COMPUTE_BACKEND_FACTORY_H_

#include <memory>
#include <string>

#include "worker/compute_backend.h"
#include "worker/hyperparameters.h"

namespace keel {

// The backend `device` names: "cpu" (with `threads` threads, 0 for one per
// hardware thread) or "cuda:N". For hyperparameters.num_models > 1 the CPU
// backend computes every model in one pass (a linear learner's or a
// factorization machine's), and so does a CUDA device's for factorization
// machines; a linear learner's on a CUDA device is wrapped in a
// MultiModelBackend. Throws Error for an unknown device, for
// "cuda:N" in a build without the CUDA backend, and when device N does not
// exist or no CUDA device is usable, saying why.
std::unique_ptr<ComputeBackend> MakeComputeBackend(const std::string& device, int threads,
                                                   const Hyperparameters& hyperparameters);

// Checks that `device` names a backend this build has and, for "cuda:N",
// that device N exists, without starting it. Throws Error saying why not.
void CheckDevice(const std::string& device);

}  // namespace keel

#endif  // KEEL_WORKER_COMPUTE_BACKEND_FACTORY_H_
