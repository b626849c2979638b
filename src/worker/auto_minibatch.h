// --mini_batch_size=auto: examples per minibatch and worker chosen from the
// size of the training data.
//
// Small data needs small minibatches for the optimizer to take enough steps:
// 1,347 rows over 2 workers at SageMaker's default of 1,000 rows a minibatch
// is one or two steps an epoch, 15 epochs about 30 updates. Auto takes a
// fortieth of a worker's share of the rows (forty steps an epoch), within
// [kAutoMinibatchLeast, kAutoMinibatchMost]: data of 40,000 rows per worker or
// more keeps 1,000. (At ten steps an epoch the linear learner still stopped
// short of its optimum on 6,366 rows: test AUC 0.733 or 0.742 as the rows
// fell to two workers, 0.741 either way at forty.)
#ifndef KEEL_WORKER_AUTO_MINIBATCH_H_
#define KEEL_WORKER_AUTO_MINIBATCH_H_

#include <cstdint>
#include <string>

#include "io/example_reader.h"

namespace keel {

constexpr int kAutoMinibatchLeast = 16;
constexpr int kAutoMinibatchMost = 1000;

// The minibatch size for `rows` training rows over `workers` workers.
int AutoMinibatchSize(uint64_t rows, int workers);

// The minibatch size for the training channel `channel` over `workers`
// workers: its rows are counted, up to the most that change the answer
// (kAutoMinibatchMost x 40 per worker). A pipe, read once, is not counted
// and gets kAutoMinibatchMost. Throws Error as the readers do (a bad record
// without skip_bad_records).
int AutoMinibatchSize(const std::string& channel, const ReaderOptions& reader, int workers);

}  // namespace keel

#endif  // KEEL_WORKER_AUTO_MINIBATCH_H_
