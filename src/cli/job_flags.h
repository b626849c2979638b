// The command line's job flags (job_flags.cc): the built-in training jobs'
// data channels, compute backend, hyperparameters (SageMaker's names),
// consistency, and the flags of `keel predict` and `keel datagen`. Every user
// of these flags includes this header; the flags are defined nowhere else.
// The job's optimizer and --job itself are cluster flags (cli/cluster_flags.h):
// the servers read them too.
#ifndef KEEL_CLI_JOB_FLAGS_H_
#define KEEL_CLI_JOB_FLAGS_H_

#include <gflags/gflags.h>

#include <cstdint>
#include <map>
#include <string>

#include "flags/flag_group.h"
#include "io/readers.h"
#include "kv/table_spec.h"
#include "worker/hyperparameters.h"
#include "worker/trainer.h"

// Data channels.
DECLARE_string(train);
DECLARE_string(validation);
DECLARE_string(holdout);
DECLARE_string(test);
DECLARE_string(data_format);
DECLARE_bool(libsvm_zero_based);
DECLARE_bool(skip_bad_records);

// Compute backend.
DECLARE_string(device);
DECLARE_string(accept);
DECLARE_int32(threads);

// Hyperparameters.
DECLARE_string(predictor_type);
DECLARE_int32(num_classes);
DECLARE_int32(num_factors);
DECLARE_uint64(feature_dim);
DECLARE_string(mini_batch_size);
DECLARE_int32(epochs);
DECLARE_bool(use_bias);
DECLARE_uint64(seed);
DECLARE_int32(early_stopping_patience);
DECLARE_double(early_stopping_tolerance);
DECLARE_string(loss);
DECLARE_double(margin);
DECLARE_double(quantile);
DECLARE_double(loss_insensitivity);
DECLARE_double(huber_delta);
DECLARE_double(f_beta);
DECLARE_int32(accuracy_top_k);
DECLARE_string(binary_classifier_model_selection_criteria);
DECLARE_double(target_precision);
DECLARE_double(target_recall);
DECLARE_uint64(num_calibration_samples);
DECLARE_string(beta_1);
DECLARE_string(beta_2);
DECLARE_bool(normalize_data);
DECLARE_string(normalize_label);
DECLARE_string(unbias_data);
DECLARE_string(unbias_label);
DECLARE_int32(num_point_for_scaler);
DECLARE_string(frequency_prior);
DECLARE_string(positive_example_weight_mult);
DECLARE_bool(balance_multiclass_weights);
DECLARE_string(momentum);
DECLARE_double(rmsprop_decay);
DECLARE_string(bias_lr_mult);
DECLARE_string(bias_wd_mult);
DECLARE_string(init_method);
DECLARE_double(init_scale);
DECLARE_double(init_sigma);
DECLARE_double(init_bias);
DECLARE_bool(use_lr_scheduler);
DECLARE_string(lr_scheduler_step);
DECLARE_string(lr_scheduler_factor);
DECLARE_string(lr_scheduler_minimum_lr);
DECLARE_string(bias_lr);
DECLARE_string(linear_lr);
DECLARE_string(factors_lr);
DECLARE_string(bias_wd);
DECLARE_string(linear_wd);
DECLARE_string(factors_wd);
DECLARE_bool(keep_best_epoch);
DECLARE_string(health_rules);
DECLARE_double(factors_l1);
DECLARE_string(bias_init_method);
DECLARE_double(bias_init_value);
DECLARE_double(bias_init_scale);
DECLARE_double(bias_init_sigma);
DECLARE_string(linear_init_method);
DECLARE_double(linear_init_value);
DECLARE_double(linear_init_scale);
DECLARE_double(linear_init_sigma);
DECLARE_string(factors_init_method);
DECLARE_double(factors_init_value);
DECLARE_double(factors_init_scale);
DECLARE_double(factors_init_sigma);
DECLARE_string(clip_gradient);
DECLARE_string(eps);
DECLARE_string(rescale_grad);

// Consistency.
DECLARE_string(staleness);
DECLARE_int32(clock_every);
DECLARE_bool(staleness_aware_steps);
DECLARE_string(slow_worker);

// predict and datagen.
DECLARE_string(data);
DECLARE_string(out);
DECLARE_string(model);
DECLARE_uint64(rows);
DECLARE_uint64(features);
DECLARE_int32(nnz);
DECLARE_int32(train_files);
DECLARE_double(label_offset);
DECLARE_double(label_scale);
DECLARE_double(feature_scale_spread);
DECLARE_int32(dense_features);
DECLARE_double(dense_offset_decades);

namespace keel {

// The headings of `keel COMMAND --help` for this file's flags (flags/flag_group.h).
std::vector<FlagGroup> JobFlagGroups();

// Whether `job` is a built-in training job (linear_learner, factorization_machines).
bool IsTrainingJob(const std::string& job);

// --holdout=auto's share of the training rows.
constexpr double kAutoHoldout = 0.1;

// --holdout for a job of channels `train` and `validation`: auto is
// kAutoHoldout without a validation channel (and a training pipe), else 0.
// Throws Error naming the flag for a bad share, a share beside --validation,
// or one of a pipe.
double HoldoutFromFlags(const std::string& train, const std::string& validation);

// Whether --epochs was given (else the job's default, which the worker may
// raise for small data: worker/auto_minibatch.h).
bool EpochsGiven();

// --mini_batch_size: 0 for auto (the worker resolves it from the data,
// worker/auto_minibatch.h), else its number. Throws Error naming the flag.
int MiniBatchSizeFromFlags();

// The job's hyperparameters from the flags (mini_batch_size 0 for auto).
// Throws Error naming a bad flag.
Hyperparameters HyperparametersFromFlags();

// The servers' tables for --job (none for jobs that are not training jobs).
std::map<uint32_t, TableSpec> JobTablesFromFlags();

// The servers' default optimizer, for a table the job does not specify: a
// training job's weights' optimizer (so --optimizer auto, --l1 and --wd mean
// what they mean for the job: a factorization machine's auto is ftrl, which
// takes --l1), else ServerOptimizerFromFlags's. Throws Error naming a bad flag.
OptimizerOptions ServersOptimizerFromFlags();

// Checks --device and --threads: the device exists and this build can use it.
// Throws Error saying why not.
void CheckComputeFlags();

// --staleness as a StalenessGate value. Throws Error if malformed.
int64_t StalenessFromFlags();
// --minibatches_in_flight for `staleness` (StalenessFromFlags). Throws Error
// if malformed.
int MinibatchesInFlightFromFlags(int64_t staleness);

// --data_format, --libsvm_zero_based, --skip_bad_records, --feature_dim.
// Throws Error for an unknown format. Without --data_format the format is
// libsvm until ResolveDataFormat reads the data.
ReaderOptions ReaderOptionsFromFlags();

// `reader` with its format settled by the first bytes (SniffDataFormat,
// io/format_sniffer.h) of the first file of `channel` (a --train or --data
// value): without --data_format, the format they show (said on the log when
// `log`, and in `*note` when given: "--data_format not given: FILE shows
// commas, so the data is read as csv"), or libsvm if they show none; with it,
// the same, but an Error naming the file and --data_format=RIGHT when they
// show another format. A pipe: channel is not read ahead (that would consume
// it): its format is --data_format's, or libsvm.
ReaderOptions ResolveDataFormat(const std::string& channel, ReaderOptions reader, bool log,
                                std::string* note = nullptr);

// Where a training job's model goes when --model_dir is not given: a new
// folder in the working directory, named for the job and the time (UTC), as an
// absolute path: /work/keel-model-linear_learner-20261125-143000. Under Slurm
// the time is the job's id (-slurm12345), the same for every task. A model is
// never thrown away: `keel launch` picks this folder and gives it to the roles
// as --model_dir; a worker started alone without one picks it itself.
std::string DefaultModelDir(const std::string& job);
// Whether --`flag` was given (on the command line or in a flagfile), not
// left at its default.
bool IsSet(const char* flag);

// DefaultModelDir for --job.
std::string DefaultModelDirFromFlags();

// --out: keygen's secret file, report's HTML file ("" for the default).
std::string OutFromFlags();
// Whether DefaultModelDir names its folder by the time (not by a Slurm job):
// then each launch's folder is its own.
bool DefaultModelDirNamedByTime();

// The worker's data and training options from the flags. Throws Error if any
// is wrong (checks only: no file is opened).
TrainerOptions TrainerOptionsFromFlags();

// Every flag in force that shapes a training run, set or default: this file's
// (but predict's and datagen's) and the cluster's --job, --optimizer,
// --learning_rate, --wd and --l1, as a JSON object of their values
// ({"epochs":3,"train":"data/train","use_bias":true}): the command line that
// reproduces the run, recorded in its model artifact. Throws Error as
// HyperparametersFromFlags does.
std::string HyperparameterJson();

}  // namespace keel

#endif  // KEEL_CLI_JOB_FLAGS_H_
