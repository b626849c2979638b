// A SageMaker job's hyperparameters as the flags of Keel's roles.
//
// SageMaker's Linear Learner and Factorization Machines name their
// hyperparameters as Keel's flags do (feature_dim, predictor_type,
// mini_batch_size, num_factors, ...), so each becomes --NAME=VALUE. Keel's
// other job flags are taken too (job, staleness, replication, ...), and
// keel train's own: servers_per_host, workers_per_host and checkpoint_dir.
// Names with a leading underscore are SageMaker's reserved ones
// (_tuning_objective_metric, _kvstore, ...): kept aside, to be logged.
#ifndef KEEL_LAUNCH_SAGEMAKER_HYPERPARAMETERS_H_
#define KEEL_LAUNCH_SAGEMAKER_HYPERPARAMETERS_H_

#include <functional>
#include <string>
#include <vector>

#include "launch/sagemaker_contract.h"

namespace keel {

// SageMaker's Linear Learner and Factorization Machines hyperparameters, by
// name, sorted (each is a Keel flag of the same name).
const std::vector<std::string>& SageMakerAlgorithmHyperparameters();

// The flags keel train sets from the contract itself (--train, --model_dir,
// --scheduler, --checkpoint_uri, ...): refused as hyperparameters.
const std::vector<std::string>& FlagsSetByTrain();

struct TrainHyperparameters {
  std::vector<std::string> role_flags;   // "--name=value", in the document's order
  std::vector<Hyperparameter> reserved;  // names with a leading underscore
  int servers_per_host = 1;              // servers_per_host, 1..64
  int workers_per_host = 1;              // workers_per_host, 1..64
  std::string checkpoint_dir;            // checkpoint_dir: "" for the contract's checkpoints/
  std::string job;                       // job: "" when not given
};

// Translates `given` (ParseHyperparameters). `keel_flag(name)` says whether
// Keel's roles take --name. Throws Error naming `path` and the first name
// that neither Keel nor SageMaker knows, one keel train sets itself, or a
// bad value of keel train's own (the roles' own values are checked where
// their flags are, before anything starts).
TrainHyperparameters TranslateHyperparameters(
    const std::vector<Hyperparameter>& given, const std::string& path,
    const std::function<bool(const std::string& name)>& keel_flag);

}  // namespace keel

#endif  // KEEL_LAUNCH_SAGEMAKER_HYPERPARAMETERS_H_
