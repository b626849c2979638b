// What the CPU running this process can do, for the loops Keel compiles a
// second time for wider vectors (the server's optimizer steps, the worker's
// row pass of 8 linear models, the wire's 16-bit conversions): each caller
// also knows whether its second copy was compiled at all.
#ifndef KEEL_BASE_CPU_FEATURES_H_
#define KEEL_BASE_CPU_FEATURES_H_

namespace keel {

// An x86-64 CPU with AVX2, whose OS keeps the vector registers' state (the
// compiler's CPU check says both); false elsewhere.
bool CpuHasAvx2();

// CpuHasAvx2 and F16C (the 16-bit float conversions), read from CPUID: not
// every compiler's CPU check knows F16C.
bool CpuHasAvx2AndF16c();

}  // namespace keel

#endif  // KEEL_BASE_CPU_FEATURES_H_
