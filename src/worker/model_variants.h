// The models of a num_models job: how each differs from the settings given.
//
// Model 0 trains with exactly the settings given. The others spread around
// them, deterministically (the same job always trains the same models): model
// k's learning rates are the given ones times 10^u_k, u_k in [-1, 1), and
// every other model adds an L2 penalty (wd) of 10^v_k, v_k in [-7, -3), to
// its weights; every third adds an L1 penalty alike when the optimizer takes
// one (adam does not). u_k, v_k come from golden-ratio (Weyl) sequences, which
// cover their ranges evenly for any number of models. A factorization
// machine of two models or more makes its last model a linear one: the
// settings given, its factors starting at zero (where their gradient is zero,
// so they stay there). Selected on validation (or held-out rows), the job's
// model is then never worse there than the linear part alone: interactions
// that overfit a small or dense data set lose to it.
//
// Why these ranges: the rate is the setting a default most often gets wrong
// by up to a decade either way (feature scales, label scales, data size), and
// a small penalty can only help a model that overfits; models that diverge or
// underfit lose the selection on validation and cost only their compute.
#ifndef KEEL_WORKER_MODEL_VARIANTS_H_
#define KEEL_WORKER_MODEL_VARIANTS_H_

#include <string>
#include <vector>

#include "worker/hyperparameters.h"

namespace keel {

// The variants of `num_models` models (1..kMaxModels) for a `job` whose
// weights use `weights` (its name decides whether an L1 penalty is spread;
// with `fast_beta`, a factorization machine on ftrl has fast-beta models).
std::vector<ModelVariant> SpreadModels(int num_models, const OptimizerOptions& weights, JobKind job,
                                       bool fast_beta = true);

// What num_models=auto resolves to for a job (docs/ARCHITECTURE.md says why).
int AutoNumModels(const Hyperparameters& hyperparameters);

// Parses a --num_models value: "auto" (AutoNumModels) or an integer in
// 1..kMaxModels. Throws Error naming the flag otherwise.
int ParseNumModels(const std::string& value, const Hyperparameters& hyperparameters);

// `hyperparameters` with `num_models` models spread by SpreadModels.
Hyperparameters WithModels(Hyperparameters hyperparameters, int num_models);

}  // namespace keel

#endif  // KEEL_WORKER_MODEL_VARIANTS_H_
