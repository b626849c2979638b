// What the CPU running this process can do, for the loops Keel compiles a
// second time for wider vectors (the server's optimizer steps, the worker's
// row pass of 8 linear models, the wire's 16-bit conversions): each caller
// also knows whether its second copy was compiled at all.
#ifndef KEEL_BASE_CPU_FEATURES_H_
#define KEEL_BASE_CPU_FEATURES_H_

// KEEL_X86_VECTORS: 1 where the compiler can build a function for AVX2 (and
// F16C) beside the baseline x86-64 code (GCC or clang on x86-64), else 0.
// KEEL_TARGET_AVX2 / KEEL_TARGET_AVX2_F16C mark such a function (nothing
// elsewhere, where such functions are not built).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KEEL_X86_VECTORS 1
#define KEEL_TARGET_AVX2 __attribute__((target("avx2")))
#define KEEL_TARGET_AVX2_F16C __attribute__((target("avx2,f16c")))
#else
#define KEEL_X86_VECTORS 0
#define KEEL_TARGET_AVX2
#define KEEL_TARGET_AVX2_F16C
#endif

namespace keel {

// An x86-64 CPU with AVX2, whose OS keeps the vector registers' state (the
// compiler's CPU check says both); false elsewhere.
bool CpuHasAvx2();

// CpuHasAvx2 and F16C (the 16-bit float conversions), read from CPUID: not
// every compiler's CPU check knows F16C.
bool CpuHasAvx2AndF16c();

}  // namespace keel

#endif  // KEEL_BASE_CPU_FEATURES_H_
