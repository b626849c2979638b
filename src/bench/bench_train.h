// `keel bench train --data=DIR [job flags]`: a training job launched on this
// machine as a user launches it, timed from the launch to its end, with where
// each epoch's time went on each worker (waiting for data, for rows,
// computing, pushing), so a reader sees which stage bounds the run, and the
// bytes the workers' data messages to and from the servers took per example
// trained (Meta and frames, sent and received; validation between epochs not
// counted), so runs with other wire settings compare.
#ifndef KEEL_BENCH_BENCH_TRAIN_H_
#define KEEL_BENCH_BENCH_TRAIN_H_

#include "bench/bench_options.h"

namespace keel {

// options.data is the data: a folder with train/ (and validation/) as `keel
// datagen` writes it, or the training file or folder itself; options.args
// but --data go to `keel launch` (--servers and --workers default to 1).
// Prints a table and a JSON line; returns 0. Throws Error if the job fails
// or its workers recorded no epoch.
int BenchTrain(const BenchTrainOptions& options);

}  // namespace keel

#endif  // KEEL_BENCH_BENCH_TRAIN_H_
