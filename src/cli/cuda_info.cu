// What the CUDA runtime reports about this machine's devices.
#include <cuda_runtime.h>

#include <string>

namespace keel {

std::string CudaDeviceSummary() {
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  std::string text = "runtime " + std::to_string(runtime / 1000) + "." +
                     std::to_string((runtime % 1000) / 10) + ", ";
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess) {
    return text + "no usable device: " + cudaGetErrorString(status);
  }
  return text + std::to_string(devices) + " device(s)";
}

}  // namespace keel
