#include "base/cpu_features.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define KEEL_X86_FEATURES 1
#else
#define KEEL_X86_FEATURES 0
#endif

namespace keel {

bool CpuHasAvx2() {
#if KEEL_X86_FEATURES
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

bool CpuHasAvx2AndF16c() {
#if KEEL_X86_FEATURES
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
