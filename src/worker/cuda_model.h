// CudaModel: the CUDA compute backend (cuda_model.cu; built when nvcc was
// found, KEEL_HAVE_CUDA). The data path and the kernels are described in
// docs/ARCHITECTURE.md ("Compute backends"). This header needs no CUDA headers.
#ifndef KEEL_WORKER_CUDA_MODEL_H_
#define KEEL_WORKER_CUDA_MODEL_H_

#include <memory>
#include <string>

#include "worker/compute_backend.h"

namespace keel {

// The CUDA backend on device `ordinal`. Throws Error, saying why, when the
// runtime finds no usable device or no device `ordinal`.
std::unique_ptr<ComputeBackend> MakeCudaModel(const Hyperparameters& hyperparameters, int ordinal);

// The number of usable CUDA devices; 0 with `*why` saying why (the runtime's
// error, or that there are none) when there are none.
int CudaDeviceCount(std::string* why);

// Opens cuBLAS, once per process: the first CUDA model does. keel does not
// link it, so that processes that never compute on a GPU do not load it.
// Returns false with `*why` (the library's name and the loader's error) when
// it cannot be opened.
bool OpenCublas(std::string* why);

}  // namespace keel

#endif  // KEEL_WORKER_CUDA_MODEL_H_
