#include "worker/training_share.h"

namespace keel {

int WorkersSharingChannel(const TrainerOptions& options, int workers) {
  return options.split_within_host > 0 ? options.split_within_host : workers;
}

std::vector<InputSplit> TrainingShare(const TrainerOptions& options, int rank, int workers,
                                      int pass) {
  const int sharing = WorkersSharingChannel(options, workers);
  return ResolveChannel(options.train, options.split_within_host > 0 ? rank % sharing : rank,
                        sharing, pass);
}

}  // namespace keel
