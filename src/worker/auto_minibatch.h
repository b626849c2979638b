// --mini_batch_size=auto, and the epochs a job runs when --epochs is not
// given: chosen from the size of the training data.
//
// Small data needs small minibatches for the optimizer to take enough steps:
// 1,347 rows over 2 workers at SageMaker's default of 1,000 rows a minibatch
// is one or two steps an epoch, 15 epochs about 30 updates. Auto takes a
// fortieth of a worker's share of the rows (forty steps an epoch), within
// [kAutoMinibatchLeast, kAutoMinibatchMost]: data of 40,000 rows per worker or
// more keeps 1,000. (At ten steps an epoch the linear learner still stopped
// short of its optimum on 6,366 rows: test AUC 0.733 or 0.742 as the rows
// fell to two workers, 0.741 either way at forty.)
//
// Tinier data still takes few steps an epoch at the least minibatch (iris's
// 101 training rows, 50 a worker: 4), so epochs not given are raised until
// every worker takes kAutoLeastSteps minibatches (fifteen epochs of forty), at
// most kAutoMostEpochs; early stopping on the validation channel or the
// held-out rows ends the job once it stops gaining (RaisesEpochs: which jobs).
#ifndef KEEL_WORKER_AUTO_MINIBATCH_H_
#define KEEL_WORKER_AUTO_MINIBATCH_H_

#include <cstdint>
#include <string>

#include "io/example_reader.h"
#include "worker/hyperparameters.h"

namespace keel {

constexpr int kAutoMinibatchLeast = 16;
constexpr int kAutoMinibatchMost = 1000;
constexpr uint64_t kAutoLeastSteps = 600;
constexpr int kAutoMostEpochs = 500;

// The training rows of `channel` read by `workers` workers, counted up to the
// most that change AutoMinibatchSize's answer (kAutoMinibatchMost x 40 per
// worker) or, given the job's default `epochs` to raise, AutoEpochs' (for
// 5 epochs: kAutoMinibatchMost x 120 per worker): a larger channel gives that
// many. Throws Error as the readers do (a bad record without skip_bad_records).
uint64_t CountTrainingRows(const std::string& channel, const ReaderOptions& reader, int workers,
                           int epochs = 0);

// The minibatch size for `rows` training rows over `workers` workers.
int AutoMinibatchSize(uint64_t rows, int workers);

// The epochs to run for `rows` rows over `workers` workers in minibatches of
// `minibatch` when the job's default is `epochs`: `epochs`, raised until each
// worker takes kAutoLeastSteps minibatches, at most kAutoMostEpochs.
int AutoEpochs(uint64_t rows, int workers, int minibatch, int epochs);

// Whether a job whose --epochs is not given has them raised by AutoEpochs
// (`validates`: it has a validation channel or held-out rows). The linear
// learner's are. A factorization machine regressor's are when held-out or
// validation rows judge its interactions against its linear model by squared
// error (ClearlyBetter), so that they keep its best epoch and stop it: boston's
// 5 epochs of about 11 minibatches a worker left it at a test MSE of 26-32,
// the rule's 50 at 18-24 (docs/BENCHMARKS.md, "Real data"); with no such rows
// more epochs only let its interactions overfit. A factorization machine
// classifier keeps its 5: its linear model (unpenalized ftrl), which it keeps
// on fewer than 200 held-out rows, grows overconfident on nearly separable
// rows as epochs pass (breast_cancer's test accuracy, medians: 0.965 at 5
// epochs, 0.955 at 19, 0.951 at 30 and at 60).
bool RaisesEpochs(const Hyperparameters& hyperparameters, bool validates);

}  // namespace keel

#endif  // KEEL_WORKER_AUTO_MINIBATCH_H_
