#include <string>

#include "cli/commands.h"

namespace keel {

#ifdef KEEL_HAVE_CUDA
// Defined in cuda_info.cu.
std::string CudaDeviceSummary();
#endif

std::string VersionText() {
  std::string text = "keel 0.1.0\n";
#ifdef KEEL_HAVE_CUDA
  text += "cuda: compiled (" + CudaDeviceSummary() + ")\n";
#else
  text += "cuda: not compiled (nvcc was not found at build time)\n";
#endif
  return text;
}

}  // namespace keel
