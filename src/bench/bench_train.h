// `keel bench train --data=DIR [job flags]`: a training job launched on this
// machine as a user launches it, timed from the launch to its end, with where
// each epoch's time went on each worker (waiting for data, for rows,
// computing, pushing), so a reader sees which stage bounds the run.
#ifndef KEEL_BENCH_BENCH_TRAIN_H_
#define KEEL_BENCH_BENCH_TRAIN_H_

#include <string>
#include <vector>

namespace keel {

// `args`: the command line after `keel bench train`. --data is the data: a
// folder with train/ (and validation/) as `keel datagen` writes it, or the
// training file or folder itself; every other flag goes to `keel launch`
// (--servers and --workers default to 1). Prints a table and a JSON line;
// returns the launch's exit status. Throws Error for a bad --data.
int BenchTrain(const std::vector<std::string>& args);

}  // namespace keel

#endif  // KEEL_BENCH_BENCH_TRAIN_H_
