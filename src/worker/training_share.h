// Which part of the training channel a worker reads: the whole channel split
// among every worker of the job, or, when each host holds its own share of
// the files (SageMaker's ShardedByS3Key), that share split among the workers
// the host runs.
#ifndef KEEL_WORKER_TRAINING_SHARE_H_
#define KEEL_WORKER_TRAINING_SHARE_H_

#include <vector>

#include "io/input_split.h"
#include "worker/trainer_options.h"

namespace keel {

// The splits of options.train that worker `rank` of `workers` reads. With
// options.split_within_host N > 0, the channel is its host's own share, read
// by the N workers of consecutive ranks the host runs (ranks h*N .. h*N+N-1):
// worker `rank` reads split rank % N of N. Otherwise split `rank` of
// `workers` of the whole channel (ResolveChannel; `pass` for a pipe given
// once per pass). Throws Error as ResolveChannel does.
std::vector<InputSplit> TrainingShare(const TrainerOptions& options, int rank, int workers,
                                      int pass = 0);

// How many workers split the channel `rank` reads: N with
// options.split_within_host N > 0, else `workers`.
int WorkersSharingChannel(const TrainerOptions& options, int workers);

}  // namespace keel

#endif  // KEEL_WORKER_TRAINING_SHARE_H_
