// KEEL_HOST_DEVICE marks the per-example math that both the CPU loops and the
// CUDA kernels call, so the CPU tests exercise exactly what the GPU runs (the
// CPU's in-place linear rows, CpuModel::LinearRowsOf, repeat its operations
// and are tested to the bit against the pass that calls them).
#ifndef KEEL_MODELS_HOST_DEVICE_H_
#define KEEL_MODELS_HOST_DEVICE_H_

#ifdef __CUDACC__
#define KEEL_HOST_DEVICE __host__ __device__
#else
#define KEEL_HOST_DEVICE
#endif

#endif  // KEEL_MODELS_HOST_DEVICE_H_
