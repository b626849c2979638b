// `keel bench admission`: a server table's memory under a power-law key
// stream with and without key admission (see bench_admission.cc).
#ifndef KEEL_BENCH_BENCH_ADMISSION_H_
#define KEEL_BENCH_BENCH_ADMISSION_H_

namespace keel {

// Runs the benchmark (--distinct_keys). Throws Error naming a bad flag.
int BenchAdmission();

}  // namespace keel

#endif  // KEEL_BENCH_BENCH_ADMISSION_H_
