#include "launch/sagemaker_hyperparameters.h"

#include <algorithm>
#include <cstdlib>

#include "base/error.h"

namespace keel {
namespace {

// keel train's own hyperparameters (not flags of the roles).
constexpr char kServersPerHost[] = "servers_per_host";
constexpr char kWorkersPerHost[] = "workers_per_host";
constexpr char kCheckpointDir[] = "checkpoint_dir";

constexpr int kMostRolesPerHost = 64;

// `value` as a count in [least, kMostRolesPerHost]. Throws Error naming `where`.
int RolesPerHost(const std::string& value, int least, const std::string& where) {
  char* end = nullptr;
  const long count = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || count < least || count > kMostRolesPerHost) {
    throw MakeError(where, " '", value, "' is not a whole number in [", least, ", ",
                    kMostRolesPerHost, "]");
  }
  return static_cast<int>(count);
}

bool Among(const std::vector<std::string>& names, const std::string& name) {
  return std::binary_search(names.begin(), names.end(), name);
}

}  // namespace

const std::vector<std::string>& SageMakerAlgorithmHyperparameters() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all = {
        // Linear Learner.
        "accuracy_top_k", "balance_multiclass_weights", "beta_1", "beta_2", "bias_lr_mult",
        "bias_wd_mult", "binary_classifier_model_selection_criteria", "early_stopping_patience",
        "early_stopping_tolerance", "epochs", "f_beta", "feature_dim", "huber_delta", "init_bias",
        "init_method", "init_scale", "init_sigma", "l1", "learning_rate", "loss",
        "loss_insensitivity", "lr_scheduler_factor", "lr_scheduler_minimum_lr", "lr_scheduler_step",
        "margin", "mini_batch_size", "momentum", "normalize_data", "normalize_label",
        "num_calibration_samples", "num_classes", "num_models", "num_point_for_scaler", "optimizer",
        "positive_example_weight_mult", "predictor_type", "quantile", "target_precision",
        "target_recall", "unbias_data", "unbias_label", "use_bias", "use_lr_scheduler", "wd",
        // Factorization Machines (beside those above).
        "bias_init_method", "bias_init_scale", "bias_init_sigma", "bias_init_value", "bias_lr",
        "bias_wd", "clip_gradient", "eps", "factors_init_method", "factors_init_scale",
        "factors_init_sigma", "factors_init_value", "factors_lr", "factors_wd",
        "linear_init_method", "linear_init_scale", "linear_init_sigma", "linear_init_value",
        "linear_lr", "linear_wd", "num_factors", "rescale_grad"};
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    return all;
  }();
  return names;
}

const std::vector<std::string>& FlagsSetByTrain() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all = {
        "advertise",   "bind",      "check_flags",    "checkpoint_uri", "data_format",
        "hostfile",    "join",      "model_dir",      "num_servers",    "num_workers",
        "port",        "port_file", "rank",           "rank_env",       "remote_keel",
        "resume",      "scheduler", "scheduler_port", "servers",        "slurm",
        "ssh_options", "test",      "train",          "validation",     "workers"};
    std::sort(all.begin(), all.end());
    return all;
  }();
  return names;
}

TrainHyperparameters TranslateHyperparameters(
    const std::vector<Hyperparameter>& given, const std::string& path,
    const std::function<bool(const std::string& name)>& keel_flag) {
  TrainHyperparameters result;
  for (const Hyperparameter& h : given) {
    const std::string where = path + ": hyperparameter " + h.name;
    if (!h.name.empty() && h.name[0] == '_') {
      result.reserved.push_back(h);
    } else if (h.name == kServersPerHost) {
      result.servers_per_host = RolesPerHost(h.value, 1, where);
    } else if (h.name == kWorkersPerHost) {
      result.workers_per_host = RolesPerHost(h.value, 1, where);
    } else if (h.name == kCheckpointDir) {
      if (h.value.empty() || h.value[0] != '/') {
        throw MakeError(where, " '", h.value, "' is not an absolute path");
      }
      result.checkpoint_dir = h.value;
    } else if (Among(FlagsSetByTrain(), h.name)) {
      throw MakeError(where, ": keel train sets --", h.name,
                      " itself from SageMaker's contract (the channels, the hosts and the "
                      "folders under the root)");
    } else if (keel_flag(h.name)) {
      if (h.name == "job") result.job = h.value;
      result.role_flags.push_back("--" + h.name + "=" + h.value);
    } else if (Among(SageMakerAlgorithmHyperparameters(), h.name)) {
      throw MakeError(where, ": SageMaker's hyperparameter has no Keel equivalent");
    } else {
      throw MakeError(where,
                      ": neither Keel nor SageMaker's Linear Learner or Factorization "
                      "Machines knows it");
    }
  }
  return result;
}

}  // namespace keel
