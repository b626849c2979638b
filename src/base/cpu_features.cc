#include "base/cpu_features.h"

#if KEEL_X86_VECTORS
#include <cpuid.h>
#endif

namespace keel {

bool CpuHasAvx2() {
#if KEEL_X86_VECTORS
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

bool CpuHasAvx2AndF16c() {
#if KEEL_X86_VECTORS
  static const bool available = [] {
    unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
    return CpuHasAvx2() && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }();
  return available;
#else
  return false;
#endif
}

}  // namespace keel
