// `keel bench admission`: a server table's memory under a power-law key
// stream with and without key admission (see bench_admission.cc).
#ifndef KEEL_BENCH_BENCH_ADMISSION_H_
#define KEEL_BENCH_BENCH_ADMISSION_H_

#include "bench/bench_options.h"

namespace keel {

// Runs the benchmark over `options.distinct_keys` keys.
int BenchAdmission(const BenchAdmissionOptions& options);

}  // namespace keel

#endif  // KEEL_BENCH_BENCH_ADMISSION_H_
