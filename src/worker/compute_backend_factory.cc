#include "worker/compute_backend_factory.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "base/error.h"
#include "worker/cpu_model.h"
#include "worker/multi_model_backend.h"
#ifdef KEEL_HAVE_CUDA
#include "worker/cuda_model.h"
#endif

namespace keel {

namespace {

// The N of "cuda:N", or -1 for "cpu". Throws Error for anything else.
int ParseDevice(const std::string& device) {
  if (device == "cpu") return -1;
  if (device.rfind("cuda:", 0) == 0) {
    const std::string number = device.substr(5);
    char* end = nullptr;
    const long ordinal = std::strtol(number.c_str(), &end, 10);
    if (!number.empty() && *end == '\0' && ordinal >= 0 && ordinal < 1024) {
      return static_cast<int>(ordinal);
    }
  }
  throw MakeError("--device '", device, "' is not cpu or cuda:N (N a device number)");
}

}  // namespace

void CheckDevice(const std::string& device) {
  const int ordinal = ParseDevice(device);
  if (ordinal < 0) return;
#ifdef KEEL_HAVE_CUDA
  std::string why;
  const int devices = CudaDeviceCount(&why);
  if (devices == 0) throw MakeError("--device ", device, ": ", why, "; use --device=cpu");
  if (ordinal >= devices) {
    throw MakeError("--device ", device, ": this machine has ", devices,
                    " CUDA device(s), numbered from 0");
  }
#else
  throw MakeError("--device ", device,
                  ": this keel was built without the CUDA backend (nvcc was not found at build "
                  "time, or KEEL_ENABLE_CUDA was OFF: the Debian package is a CPU build); use "
                  "--device=cpu");
#endif
}

std::unique_ptr<ComputeBackend> MakeComputeBackend(const std::string& device, int threads,
                                                   const Hyperparameters& hyperparameters) {
  if (threads < 0) throw MakeError("--threads must be 0 (one per hardware thread) or more");
  CheckDevice(device);
  const int ordinal = ParseDevice(device);
  // The CPU backend computes several models together in one pass (their
  // weights side by side in each row), and so does the CUDA backend for
  // factorization machines; a linear learner's on a CUDA device, one model at
  // a time.
  const bool together = ordinal < 0 || hyperparameters.job == JobKind::kFactorizationMachines;
  if (hyperparameters.num_models > 1 && !together) {
    return std::make_unique<MultiModelBackend>(
        hyperparameters, MakeComputeBackend(device, threads, hyperparameters.Model(0)));
  }
  if (ordinal < 0) {
    if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return std::make_unique<CpuModel>(hyperparameters, threads);
  }
#ifdef KEEL_HAVE_CUDA
  return MakeCudaModel(hyperparameters, ordinal);
#else
  throw MakeError("unreachable: CheckDevice refuses cuda devices in this build");
#endif
}

}  // namespace keel
