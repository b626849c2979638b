#include <string>

#include "cli/commands.h"
#include "keel_version.h"

namespace keel {

#ifdef KEEL_HAVE_CUDA
// Defined in cuda_info.cu.
std::string CudaDeviceSummary();
#endif

std::string VersionText() {
  std::string text = "keel " KEEL_VERSION "\ncommit: " KEEL_COMMIT "\n";
#ifdef KEEL_HAVE_CUDA
  text += "cuda: compiled (" + CudaDeviceSummary() + ")\n";
#else
  text +=
      "cuda: not compiled (nvcc was not found at build time, or KEEL_ENABLE_CUDA was OFF)\n";
#endif
  return text;
}

}  // namespace keel
