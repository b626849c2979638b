#include "cli/job_flags.h"

#include <glog/logging.h>
#include <unistd.h>

#include <cctype>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <set>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "base/time.h"
#include "cli/cluster_flags.h"
#include "cli/wire_flags.h"
#include "flags/flag_rules.h"
#include "io/format_sniffer.h"
#include "io/input_split.h"
#include "kv/staleness_gate.h"
#include "worker/compute_backend.h"
#include "worker/compute_backend_factory.h"
#include "worker/exact_sum_job.h"
#include "worker/model_variants.h"

// Data channels.
DEFINE_string(train, "",
              "training channel: a file, a folder of files, or pipe:PATH ({rank} in PATH: the "
              "worker's rank; {pass}: a stream per pass over the data, 0, 1, ...)");
DEFINE_string(validation, "", "validation channel (metrics every epoch)");
DEFINE_string(test, "", "test channel (metrics at the end)");
DEFINE_string(holdout, "auto",
              "share of the training rows held out, as a validation channel, to select the "
              "model and the epoch and to stop early, when there is no --validation: auto "
              "(0.1 without --validation, else 0), 0 (train on every row) or a share in "
              "(0, 0.5]");
DEFINE_string(data_format, "",
              "libsvm, csv or recordio-protobuf (not given: what the first training file shows: "
              "recordIO's magic number, index:value pairs or commas; libsvm if it shows none)");
DEFINE_int32(split_within_host, 0,
             "the training channel is each host's own share of the files (SageMaker's "
             "ShardedByS3Key), split among the N workers of consecutive ranks each host runs "
             "(0: the channel is the whole job's, split among every worker)");
DEFINE_bool(libsvm_zero_based, false, "libsvm feature indices start at 0 (default: 1)");
DEFINE_bool(skip_bad_records, false, "skip and count malformed records instead of failing");
DEFINE_string(cache_dir, "",
              "where each worker keeps its share's parsed minibatches after the first pass, "
              "for later epochs to read instead of the text (a pipe is then read once, a "
              "pipe naming {pass} too while its pass fits): a "
              "folder, kept and reused while the input is unchanged; none: parse every epoch "
              "(default: a folder under $TMPDIR, removed at the end)");
DEFINE_uint64(cache_max_bytes, uint64_t{4} << 30,
              "largest batch cache file per worker; a share that needs more is parsed every "
              "epoch (about 20 bytes per non-zero)");

// Compute backend.
DEFINE_string(device, "cpu", "where workers (and predict) compute: cpu or cuda:N");
DEFINE_int32(threads, 1,
             "cpu device: threads per worker (0: one per hardware thread). The default, 1, "
             "suits keel launch, which runs several workers and servers on one machine");

// Hyperparameters, as SageMaker's built-in algorithms name them.
DEFINE_string(predictor_type, "binary_classifier",
              "binary_classifier, regressor or multiclass_classifier");
DEFINE_int32(num_classes, 2, "classes of a multiclass_classifier");
DEFINE_int32(num_factors, 8, "factorization machine: factors per feature");
DEFINE_uint64(feature_dim, 0, "feature indices must be below this (0: not checked)");
DEFINE_string(mini_batch_size, "auto",
              "examples per minibatch and worker (auto: a fortieth of a worker's share of the "
              "training rows, in 16..1000, so that small data gets enough steps)");
DEFINE_int32(epochs, 15,
             "passes over the training data (SageMaker's linear learner default; "
             "factorization_machines: 5 unless given; not given, the linear learner's, and a "
             "factorization machine regressor's with held-out or validation rows, are raised for "
             "small data until each worker takes 600 minibatches, at most 500 epochs)");
DEFINE_bool(use_bias, true, "learn a bias term");
DEFINE_uint64(seed, 1, "seed of the initializers and of datagen");
DEFINE_int32(early_stopping_patience, 3,
             "epochs without validation gain before stopping (needs --validation)");
DEFINE_double(early_stopping_tolerance, 0.001, "relative gain that counts as a gain");
DEFINE_string(loss, "auto",
              "auto (logistic, squared_loss or softmax_loss by --predictor_type); "
              "binary_classifier: logistic, hinge_loss; regressor: squared_loss, absolute_loss, "
              "eps_insensitive_squared_loss, eps_insensitive_absolute_loss, quantile_loss, "
              "huber_loss; multiclass_classifier: softmax_loss");
DEFINE_double(margin, 1.0, "hinge_loss: the margin the score must clear (> 0)");
DEFINE_double(quantile, 0.5, "quantile_loss: the quantile of the label to predict, in (0, 1)");
DEFINE_double(loss_insensitivity, 0.01,
              "eps_insensitive_*_loss: errors this small cost nothing (> 0)");
DEFINE_double(huber_delta, 1.0, "huber_loss: squared below this error, absolute above (> 0)");
DEFINE_double(f_beta, 1.0,
              "beta of the F-score metrics (binary_f_beta, macro_f_beta): recall weighs beta "
              "times as much as precision");
DEFINE_int32(accuracy_top_k, 3,
             "multiclass: k of the multiclass_top_k_accuracy metric (the label among the k most "
             "probable classes)");
DEFINE_string(binary_classifier_model_selection_criteria, "accuracy",
              "binary_classifier (linear learner): what the decision threshold is tuned for at the "
              "end, on --validation or else on --num_calibration_samples training rows: "
              "accuracy, f_beta (--f_beta), precision_at_target_recall (--target_recall), "
              "recall_at_target_precision (--target_precision), or loss_function (no tuning)");
DEFINE_double(target_precision, 0.8,
              "recall_at_target_precision: the precision to hold, in [0, 1]");
DEFINE_double(target_recall, 0.8, "precision_at_target_recall: the recall to hold, in [0, 1]");
DEFINE_uint64(num_calibration_samples, 10000000,
              "the most rows (of --validation, else of --train) the threshold is tuned on");
DEFINE_string(beta_1, "auto", "adam: decay of the first moment, in [0, 1) (auto: 0.9)");
DEFINE_string(beta_2, "auto", "adam: decay of the second moment, in [0, 1) (auto: 0.999)");
DEFINE_bool(normalize_data, true,
            "scale each feature by statistics of a sample taken before training (features "
            "present in most rows are also centred: --unbias_data), whatever the data's "
            "format; folded into the saved model");
DEFINE_string(normalize_label, "auto",
              "regressor: centre and scale the label by the sample's mean and standard "
              "deviation (auto: on for a regressor; classifiers ignore it)");
DEFINE_string(unbias_data, "auto",
              "centre features on their sample mean: auto (with --normalize_data and "
              "--use_bias, the features present in at least half the sample's rows, in any "
              "format), true (every feature: sparse rows become dense) or false");
DEFINE_string(unbias_label, "auto",
              "regressor: centre the label on its sample mean (auto: with --normalize_label and "
              "--use_bias)");
DEFINE_int32(num_point_for_scaler, 100000,
             "rows of the training sample the statistics come from (SageMaker's default is "
             "10000; on sparse data that leaves most rare features unscaled)");
DEFINE_string(frequency_prior, "auto",
              "sparse data: a feature in a share p of the sample's rows below this frequency F "
              "has its values scaled by p / F, a prior that a rare feature's weight is small "
              "(a Keel extra; auto: 1,000 over the training rows, counted or estimated from "
              "the sample's bytes a row, at most 0.003 for linear_learner and 0.001 for "
              "factorization_machines; 0: off)");
DEFINE_int32(admit_after, 0,
             "servers: a feature gets a row only once it has been pushed this many times (its "
             "earlier gradients are dropped; pulls read its initial weights); counted in a "
             "count-min sketch of --admit_sketch_mib per key range (0: every feature at once)");
DEFINE_int32(admit_sketch_mib, 8,
             "servers: MiB of admission counters per key range (more: fewer rare features "
             "admitted by collisions)");
DEFINE_int32(evict_after, 0,
             "servers: drop a feature's row when it was not pushed in the last N clocks (a "
             "clock: a minibatch, or --clock_every); it starts again from its initial weights "
             "(0: never)");
DEFINE_string(positive_example_weight_mult, "1.0",
              "binary_classifier: the weight of a positive example's loss, a positive number or "
              "balanced (negatives over positives in the sample)");
DEFINE_bool(balance_multiclass_weights, false,
            "multiclass_classifier: weigh each class rows / (classes x class rows) of the "
            "sample, so that every class counts the same in the loss");
DEFINE_string(momentum, "auto", "sgd: momentum, in [0, 1) (auto: 0, plain SGD)");
DEFINE_double(rmsprop_decay, 0.9,
              "rmsprop: decay of the mean square gradient, in [0, 1) (a Keel extra)");
DEFINE_string(bias_lr_mult, "auto",
              "the bias's learning rate as a multiple of --learning_rate (auto: 1)");
DEFINE_string(bias_wd_mult, "auto", "the bias's weight decay as a multiple of --wd (auto: 0)");
DEFINE_string(init_method, "",
              "linear learner: initial weights, uniform (--init_scale) or normal "
              "(--init_sigma); not set: --linear_init_method (zeros by default)");
DEFINE_double(init_scale, 0.07, "init_method=uniform: weights in [-scale, scale]");
DEFINE_double(init_sigma, 0.01, "init_method=normal: standard deviation of the weights");
DEFINE_double(init_bias, 0, "initial bias (the same as --bias_init_value)");
DEFINE_bool(use_lr_scheduler, true,
            "decrease the learning rate as a row's updates accumulate (not ftrl)");
DEFINE_string(lr_scheduler_step, "auto",
              "updates of a row between decreases of its rate, a positive integer (auto: 100)");
DEFINE_string(lr_scheduler_factor, "auto",
              "each decrease multiplies the rate by this, in (0, 1] (auto: 0.99)");
DEFINE_string(lr_scheduler_minimum_lr, "auto",
              "the schedule never takes a rate below this, positive (auto: 1e-5)");
DEFINE_string(bias_lr, "auto",
              "learning rate of the bias, positive (auto: --bias_lr_mult x --learning_rate)");
DEFINE_string(linear_lr, "auto",
              "factorization machine: rate of the linear terms, positive (auto: "
              "--learning_rate)");
DEFINE_string(factors_lr, "auto",
              "factorization machine: rate of the factors, positive (auto: --learning_rate)");
DEFINE_string(bias_wd, "auto",
              "weight decay of the bias, non-negative (auto: --bias_wd_mult x --wd, 0)");
DEFINE_string(linear_wd, "auto",
              "factorization machine: weight decay of the linear terms, non-negative (auto: "
              "--wd)");
DEFINE_string(factors_wd, "auto",
              "factorization machine: weight decay of the factors, non-negative (auto: --wd)");
DEFINE_string(num_models, "auto",
              "models trained side by side in one pass, 1..32, the best kept (auto: 8; "
              "docs/ARCHITECTURE.md says how they differ)");
DEFINE_bool(keep_best_epoch, true,
            "keep the weights of the epoch with the best validation loss (worker 0 dumps them "
            "whenever it improves) rather than the last epoch's; not kept across a resume");
DEFINE_string(health_rules, "on",
              "on or off: stop the job, naming the epoch, the table and the figure, when a "
              "model's training loss turns non-finite or a gradient explodes (README: Training "
              "health)");
DEFINE_double(factors_l1, 0,
              "factorization machine: L1 penalty of the factors (sgd, adagrad, ftrl; the linear "
              "terms take --l1)");
DEFINE_string(bias_init_method, "constant", "normal, uniform or constant");
DEFINE_double(bias_init_value, 0, "constant initial bias");
DEFINE_double(bias_init_scale, 0.01, "uniform initial bias: range [-scale, scale]");
DEFINE_double(bias_init_sigma, 0.01, "normal initial bias: standard deviation");
DEFINE_string(linear_init_method, "constant", "initial linear weights: normal, uniform, constant");
DEFINE_double(linear_init_value, 0, "constant initial linear weights");
DEFINE_double(linear_init_scale, 0.01, "uniform initial linear weights: range");
DEFINE_double(linear_init_sigma, 0.01, "normal initial linear weights: standard deviation");
DEFINE_string(factors_init_method, "normal", "initial factors: normal, uniform, constant");
DEFINE_double(factors_init_value, 0, "constant initial factors");
DEFINE_double(factors_init_scale, 0.01, "uniform initial factors: range");
DEFINE_double(factors_init_sigma, 0.01, "normal initial factors: standard deviation");
DEFINE_string(clip_gradient, "auto",
              "servers clip each gradient coordinate to [-x, x] after --rescale_grad, positive "
              "(auto: no clipping)");
DEFINE_string(eps, "auto",
              "adagrad, rmsprop, adam: epsilon added to the denominator, positive (auto: 1e-8)");
DEFINE_string(ftrl_beta, "auto",
              "ftrl: beta of the per-coordinate rate alpha / (beta + sqrt(n)), positive, in the "
              "units of a minibatch mean's gradient (auto: linear_learner 0.001, a beta of 1 per "
              "example at 1,000 examples a minibatch; factorization_machines 1, and 0.001 in "
              "two of its 8 default models; a number: every model's)");
DEFINE_string(rescale_grad, "auto",
              "servers multiply each pushed gradient by this before the step, positive (auto: "
              "1; workers push minibatch means)");

// Consistency.
DEFINE_string(staleness, "inf",
              "how many clocks a worker may run ahead of the slowest: 0 (BSP), k (SSP) or inf "
              "(asynchronous); servers and workers must agree");
DEFINE_int32(clock_every, 1, "minibatches per clock");
DEFINE_string(minibatches_in_flight, "auto",
              "minibatches a worker pulls ahead of the one it computes and keeps pushes in "
              "flight for: auto (1 with --staleness=0, else 2) or 1 to 8; each pull carries the "
              "clock of the minibatch that reads it, so --staleness holds at any depth (each adds "
              "a minibatch of the worker's own staleness where the gate lets pulls through)");
DEFINE_bool(staleness_aware_steps, true,
            "servers scale each push's step to the weight and bias tables by "
            "1/sqrt(its staleness in updates), so asynchronous workers' late gradients do not "
            "overshoot; false: every push takes the optimizer's whole step");
DEFINE_string(slow_worker, "",
              "RANK:FACTOR: worker RANK takes FACTOR times as long per minibatch (a straggler, "
              "for experiments)");

// predict and datagen.
DEFINE_string(data, "", "predict: the file or folder to score");
DEFINE_string(out, "",
              "predict: predictions file ('-': standard output); datagen: output folder; keygen: "
              "the new secret's "
              "file; report: the HTML file (default <MODEL_DIR>/report.html, ./report.html "
              "for s3://)");
DEFINE_string(accept, "csv",
              "predict: the predictions' format: csv, json, jsonlines or recordio "
              "(application/x-recordio-protobuf)");
DEFINE_string(model, "linear", "datagen: planted model, linear or fm");
DEFINE_uint64(rows, 100000, "datagen: training rows (validation and test get a tenth each)");
DEFINE_uint64(features, 10000, "datagen: number of features");
DEFINE_int32(nnz, 20, "datagen: non-zeros per row");
DEFINE_int32(train_files, 4, "datagen: training files");
DEFINE_double(label_offset, 0,
              "datagen --predictor_type=regressor: the labels' mean (label = offset + scale x "
              "(standardized planted score + noise))");
DEFINE_double(label_scale, 1, "datagen --predictor_type=regressor: the labels' scale");
DEFINE_double(feature_scale_spread, 0,
              "datagen: multiply each feature's values by 10^u, u uniform in [-S/2, S/2] "
              "decades (0: every value is 1)");
DEFINE_int32(dense_features, 0,
             "datagen: features present in every row after the sparse ones, each a measurement "
             "offset_j + spread_j x z (offset 10^u, u in [0, --dense_offset_decades]; spread 3% "
             "to 50% of it); the planted model weighs z");
DEFINE_double(dense_offset_decades, 3, "datagen: the dense features' offsets span this many decades");

namespace keel {

std::vector<FlagGroup> JobFlagGroups() {
  return {
      {"data",
       {"train", "validation", "holdout", "test", "split_within_host", "data_format",
        "libsvm_zero_based", "skip_bad_records", "cache_dir", "cache_max_bytes", "model_dir"}},
      {"compute", {"device", "threads"}},
      {"job",
       {"predictor_type", "num_classes", "num_factors", "feature_dim", "mini_batch_size", "epochs",
        "use_bias", "seed", "num_models", "early_stopping_patience", "early_stopping_tolerance",
        "keep_best_epoch", "health_rules"}},
      {"loss and metrics",
       {"loss", "margin", "quantile", "loss_insensitivity", "huber_delta", "f_beta",
        "accuracy_top_k", "binary_classifier_model_selection_criteria", "target_precision",
        "target_recall", "num_calibration_samples"}},
      {"optimizer",
       {"beta_1", "beta_2", "momentum", "rmsprop_decay", "eps", "ftrl_beta", "rescale_grad",
        "clip_gradient", "bias_lr_mult", "bias_wd_mult", "bias_lr", "bias_wd", "linear_lr",
        "linear_wd", "factors_lr", "factors_wd", "factors_l1"}},
      {"learning rate schedule",
       {"use_lr_scheduler", "lr_scheduler_step", "lr_scheduler_factor", "lr_scheduler_minimum_lr"}},
      {"initialization",
       {"init_method", "init_scale", "init_sigma", "init_bias", "bias_init_method",
        "bias_init_value", "bias_init_scale", "bias_init_sigma", "linear_init_method",
        "linear_init_value", "linear_init_scale", "linear_init_sigma", "factors_init_method",
        "factors_init_value", "factors_init_scale", "factors_init_sigma"}},
      {"normalization",
       {"normalize_data", "normalize_label", "unbias_data", "unbias_label", "num_point_for_scaler",
        "frequency_prior", "positive_example_weight_mult", "balance_multiclass_weights"}},
      {"admission and eviction", {"admit_after", "admit_sketch_mib", "evict_after"}},
      {"consistency",
       {"staleness", "clock_every", "staleness_aware_steps", "minibatches_in_flight"}},
      {"faults", {"slow_worker"}},
      {"predict", {"data", "accept"}},
      {"output", {"out"}},
      {"datagen",
       {"model", "rows", "features", "nnz", "train_files", "label_offset", "label_scale",
        "feature_scale_spread", "dense_features", "dense_offset_decades"}},
  };
}
namespace {

InitializerSpec Initializer(const std::string& prefix, const std::string& method, double value,
                            double scale, double sigma) {
  InitializerSpec spec;
  spec.method = method;
  spec.value = static_cast<float>(value);
  if (method == "normal") {
    spec.scale = static_cast<float>(sigma);
  } else if (method == "uniform") {
    spec.scale = static_cast<float>(scale);
  } else if (method != "constant") {
    throw MakeError("--", prefix, "_init_method '", method, "' is not normal, uniform or constant");
  }
  return spec;
}

// How much of a data file SniffDataFormat reads: its first lines.
constexpr size_t kSniffBytes = 4096;


// The factorization machine's epochs unless --epochs is given (SageMaker's FM
// default, 1, leaves the factors near their start).
constexpr int kFmDefaultEpochs = 5;

// A rate flag: `automatic` for auto, else its number, which must be positive.
// Throws Error naming the flag.
float PositiveOrAuto(const char* flag, const std::string& value, double automatic) {
  const double number = AutoOr(flag, value, automatic);
  if (!(number > 0)) throw MakeError("--", flag, " ", value, " must be a positive number");
  return static_cast<float>(number);
}

// A penalty flag: `automatic` for auto, else its number, which must not be
// negative. Throws Error naming the flag.
float NonNegativeOrAuto(const char* flag, const std::string& value, double automatic) {
  const double number = AutoOr(flag, value, automatic);
  if (!(number >= 0)) throw MakeError("--", flag, " ", value, " must be a non-negative number");
  return static_cast<float>(number);
}

// The bias's rate: --bias_lr_mult times --learning_rate, or Keel's absolute
// --bias_lr (SageMaker's factorization machine name, a Keel alias for the
// linear learner); not both. `learning_rate` is the weights' resolved rate.
float BiasLearningRate(float learning_rate) {
  if (FLAGS_bias_lr_mult != "auto" && FLAGS_bias_lr != "auto") {
    throw MakeError("--bias_lr_mult and --bias_lr both set the bias's learning rate: set one");
  }
  if (FLAGS_bias_lr != "auto") return PositiveOrAuto("bias_lr", FLAGS_bias_lr, 0);
  return learning_rate * PositiveOrAuto("bias_lr_mult", FLAGS_bias_lr_mult, 1.0);
}

// The bias's L2 penalty: --bias_wd_mult times --wd, or Keel's absolute
// --bias_wd; not both. Neither: no penalty, as SageMaker's linear learner
// default. `wd` is the weights' resolved weight decay.
float BiasWeightDecay(float wd) {
  if (FLAGS_bias_wd_mult != "auto" && FLAGS_bias_wd != "auto") {
    throw MakeError("--bias_wd_mult and --bias_wd both set the bias's weight decay: set one");
  }
  if (FLAGS_bias_wd != "auto") return NonNegativeOrAuto("bias_wd", FLAGS_bias_wd, 0);
  return wd * NonNegativeOrAuto("bias_wd_mult", FLAGS_bias_wd_mult, 0.0);
}

// --use_lr_scheduler and --lr_scheduler_*, `auto` resolved (docs/ARCHITECTURE.md
// says why these values).
OptimizerOptions::Schedule ScheduleFromFlags() {
  OptimizerOptions::Schedule schedule;
  schedule.enabled = FLAGS_use_lr_scheduler;
  const double step = AutoOr("lr_scheduler_step", FLAGS_lr_scheduler_step, 100);
  if (!(step >= 1 && step <= 1e9 && step == std::floor(step))) {
    throw MakeError("--lr_scheduler_step ", FLAGS_lr_scheduler_step, " is not a positive integer");
  }
  schedule.step = static_cast<int>(step);
  schedule.factor =
      static_cast<float>(AutoOr("lr_scheduler_factor", FLAGS_lr_scheduler_factor, 0.99));
  schedule.minimum_rate =
      static_cast<float>(AutoOr("lr_scheduler_minimum_lr", FLAGS_lr_scheduler_minimum_lr, 1e-5));
  return schedule;
}

// The linear weights' initializer: SageMaker's --init_method (uniform with
// --init_scale, normal with --init_sigma) when set, else Keel's
// --linear_init_* (which it may not contradict).
InitializerSpec LinearInitializer() {
  if (FLAGS_init_method.empty()) {
    return Initializer("linear", FLAGS_linear_init_method, FLAGS_linear_init_value,
                       FLAGS_linear_init_scale, FLAGS_linear_init_sigma);
  }
  if (FLAGS_init_method != "uniform" && FLAGS_init_method != "normal") {
    throw MakeError("--init_method '", FLAGS_init_method, "' is not uniform or normal");
  }
  if (IsSet("linear_init_method")) {
    throw MakeError("--init_method and --linear_init_method both set the initial weights: set one");
  }
  return Initializer("linear", FLAGS_init_method, 0, FLAGS_init_scale, FLAGS_init_sigma);
}

// The bias's initializer: --init_bias (SageMaker's name) is the constant
// --bias_init_value; not both, and not with another --bias_init_method.
InitializerSpec BiasInitializer() {
  if (IsSet("init_bias")) {
    if (IsSet("bias_init_value") || FLAGS_bias_init_method != "constant") {
      throw MakeError(
          "--init_bias and --bias_init_method/--bias_init_value both set the initial "
          "bias: set one");
    }
    return Initializer("bias", "constant", FLAGS_init_bias, 0, 0);
  }
  return Initializer("bias", FLAGS_bias_init_method, FLAGS_bias_init_value, FLAGS_bias_init_scale,
                     FLAGS_bias_init_sigma);
}

// A factorization machine's weight rows: column 0 the linear term (--linear_lr,
// --l1, --linear_wd), then the factors (--factors_lr, --factors_l1,
// --factors_wd); `auto` takes the weights' resolved rate and weight decay.
std::vector<OptimizerOptions::ColumnGroup> FactorizationMachineGroups(
    const OptimizerOptions& weights, int num_factors) {
  OptimizerOptions::ColumnGroup linear;
  linear.begin = 0;
  linear.end = 1;
  linear.learning_rate = PositiveOrAuto("linear_lr", FLAGS_linear_lr, weights.learning_rate);
  linear.l1 = weights.l1;
  linear.l2 = NonNegativeOrAuto("linear_wd", FLAGS_linear_wd, weights.l2);
  OptimizerOptions::ColumnGroup factors;
  factors.begin = 1;
  factors.end = 1 + num_factors;
  factors.learning_rate = PositiveOrAuto("factors_lr", FLAGS_factors_lr, weights.learning_rate);
  factors.l1 = static_cast<float>(FLAGS_factors_l1);
  factors.l2 = NonNegativeOrAuto("factors_wd", FLAGS_factors_wd, weights.l2);
  return {linear, factors};
}

// The weights' optimizer from --optimizer and its flags, every `auto`
// resolved for `job` (AutoLearningRate; the rest job-independent).
// --optimizer for the job: auto is adam (ResolveOptimizerName), but ftrl for
// a factorization machine binary classifier: adam's normalised steps move the
// factors of features seen a few times as far as those of common ones, and
// they overfit within an epoch (docs/BENCHMARKS.md, the FM analysis; on the
// 10^6-row set the default job reached validation AUC 0.7709 with adam and
// 0.7783-0.7811 with ftrl).
std::string OptimizerFor(JobKind job, PredictorType type) {
  if (FLAGS_optimizer == "auto" && job == JobKind::kFactorizationMachines &&
      type == PredictorType::kBinaryClassifier) {
    return "ftrl";
  }
  return ResolveOptimizerName(FLAGS_optimizer);
}

OptimizerOptions WeightsOptimizerFromFlags(JobKind job, PredictorType type) {
  OptimizerOptions weights;
  weights.name = OptimizerFor(job, type);
  weights.learning_rate =
      PositiveOrAuto("learning_rate", FLAGS_learning_rate, AutoLearningRate(weights.name));
  weights.l1 = NonNegativeOrAuto("l1", FLAGS_l1, 0);
  weights.l2 = NonNegativeOrAuto("wd", FLAGS_wd, 0);
  weights.beta1 = static_cast<float>(AutoOr("beta_1", FLAGS_beta_1, 0.9));
  weights.beta2 = static_cast<float>(AutoOr("beta_2", FLAGS_beta_2, 0.999));
  weights.momentum = static_cast<float>(AutoOr("momentum", FLAGS_momentum, 0.0));
  weights.rmsprop_decay = static_cast<float>(FLAGS_rmsprop_decay);
  weights.epsilon = PositiveOrAuto("eps", FLAGS_eps, 1e-8);
  weights.ftrl_beta = PositiveOrAuto("ftrl_beta", FLAGS_ftrl_beta, AutoFtrlBeta(job));
  weights.rescale_grad = PositiveOrAuto("rescale_grad", FLAGS_rescale_grad, 1.0);
  weights.clip_gradient = FLAGS_clip_gradient == "auto"  // no clipping
                              ? 0.0f
                              : PositiveOrAuto("clip_gradient", FLAGS_clip_gradient, 0.0);
  weights.schedule = ScheduleFromFlags();
  return weights;
}

// --slow_worker RANK:FACTOR into options->slow_rank and slow_factor (left as
// they are when the flag is empty). Throws Error if malformed.
void SlowWorkerFromFlags(TrainerOptions* options) {
  if (FLAGS_slow_worker.empty()) return;
  const size_t colon = FLAGS_slow_worker.find(':');
  char* end = nullptr;
  const long rank = std::strtol(FLAGS_slow_worker.c_str(), &end, 10);
  const double factor =
      colon == std::string::npos ? 0 : std::strtod(FLAGS_slow_worker.c_str() + colon + 1, nullptr);
  if (colon == std::string::npos || end != FLAGS_slow_worker.c_str() + colon || rank < 0 ||
      !(factor >= 1)) {
    throw MakeError("--slow_worker '", FLAGS_slow_worker,
                    "' is not RANK:FACTOR with FACTOR >= 1 (for example 1:3)");
  }
  options->slow_rank = static_cast<int>(rank);
  options->slow_factor = factor;
}

// A flag's value as JSON: a boolean, a number (a finite one), else a string.
std::string FlagValueJson(const gflags::CommandLineFlagInfo& flag) {
  if (flag.type == "bool") return flag.current_value == "true" ? "true" : "false";
  if (flag.type != "string") {
    char* end = nullptr;
    const double value = std::strtod(flag.current_value.c_str(), &end);
    if (*end == '\0' && std::isfinite(value)) return flag.current_value;
  }
  return JsonQuote(flag.current_value);
}

// The job's counts within sane bounds (the hyperparameters' own rules, such
// as --num_classes at least 3 for a multiclass classifier, are
// Hyperparameters::Validate's). Throws Error naming the flag, its value and
// the bound.
void CheckJobCounts() {
  RequireInRange("num_classes", FLAGS_num_classes, 2, 1000000);
  MiniBatchSizeFromFlags();
  RequireInRange("epochs", FLAGS_epochs, 1, 1000000);
  RequireInRange("early_stopping_patience", FLAGS_early_stopping_patience, 1, kMaxCount);
  RequireInRange("accuracy_top_k", FLAGS_accuracy_top_k, 1, kMaxCount);
  RequireInRange("num_point_for_scaler", FLAGS_num_point_for_scaler, 1, 100000000);
}

// `value` of --`flag`: `if_auto` for auto, else an integer in [low, high]
// (`range` says which in the error).
int AutoOrInteger(const char* flag, const std::string& value, int if_auto, int low, int high,
                  const char* range) {
  if (value == "auto") return if_auto;
  long long parsed = 0;
  if (!ParseIntegerInRange(value, low, high, &parsed)) {
    throw MakeError("--", flag, " '", value, "' is not auto or an integer ", range);
  }
  return static_cast<int>(parsed);
}

}  // namespace

ReaderOptions ReaderOptionsFromFlags() {
  ReaderOptions options;
  options.format =
      FLAGS_data_format.empty() ? DataFormat::kLibsvm : ParseDataFormat(FLAGS_data_format);
  options.zero_based = FLAGS_libsvm_zero_based;
  options.skip_bad_records = FLAGS_skip_bad_records;
  options.feature_dim = FLAGS_feature_dim;
  return options;
}

ReaderOptions ResolveDataFormat(const std::string& channel, ReaderOptions reader, bool log,
                                std::string* note) {
  if (channel.rfind("pipe:", 0) == 0) return reader;
  const std::string first_file = ListInputs(channel).front().path;
  const SniffedFormat sniffed = SniffDataFormat(ReadHead(first_file, kSniffBytes));
  if (!sniffed.format) return reader;
  const char* name = DataFormatName(*sniffed.format);
  if (FLAGS_data_format.empty()) {
    const std::string said = "--data_format not given: " + first_file + " shows " +
                             sniffed.evidence + ", so the data is read as " + name;
    LOG_IF(INFO, log) << said;
    if (note) *note = said;
    reader.format = *sniffed.format;
  } else if (reader.format != *sniffed.format) {
    throw MakeError("--data_format=", FLAGS_data_format, " but ", first_file, " shows ",
                    sniffed.evidence, ": it is ", name, " data; set --data_format=", name,
                    " (or leave it out)");
  }
  return reader;
}

int64_t StalenessFromFlags() {
  if (FLAGS_staleness == "inf") return StalenessGate::kAsynchronous;
  long long value = 0;
  if (!ParseIntegerInRange(FLAGS_staleness, 0, LLONG_MAX, &value)) {
    throw MakeError("--staleness '", FLAGS_staleness, "' is not a non-negative integer or inf");
  }
  return value;
}

int MinibatchesInFlightFromFlags(int64_t staleness) {
  // Bulk-synchronous pulls wait for every worker's previous minibatch
  // whatever the depth: a deeper pipeline would only hold more of them.
  // At most 8: a server remembers a worker's 16 newest pull clocks
  // (PushStaleness::kRemembered), and a push reads depth + 1 back.
  return AutoOrInteger("minibatches_in_flight", FLAGS_minibatches_in_flight, staleness == 0 ? 1 : 2,
                       1, 8, "from 1 to 8");
}

bool DefaultModelDirNamedByTime() {
  const char* slurm_job = getenv("SLURM_JOB_ID");
  return slurm_job == nullptr || *slurm_job == '\0';
}

std::string DefaultModelDir(const std::string& job) {
  std::string when;
  if (!DefaultModelDirNamedByTime()) {
    when = std::string("slurm") + getenv("SLURM_JOB_ID");
  } else {
    for (const char c : UtcTimestamp()) {  // 2026-11-25T14:30:00Z: 20261125-143000
      if (isdigit(static_cast<unsigned char>(c))) when += c;
      if (c == 'T') when += '-';
    }
  }
  char folder[4096];
  if (!getcwd(folder, sizeof(folder))) throw MakeError("cannot tell the working directory");
  return std::string(folder) + "/keel-model-" + job + "-" + when;
}

std::string DefaultModelDirFromFlags() { return DefaultModelDir(FLAGS_job); }

std::string OutFromFlags() { return FLAGS_out; }

bool IsTrainingJob(const std::string& job) {
  return job == "linear_learner" || job == "factorization_machines";
}

bool EpochsGiven() { return IsSet("epochs"); }

int MiniBatchSizeFromFlags() {
  return AutoOrInteger("mini_batch_size", FLAGS_mini_batch_size, 0, 1, 10000000, "in 1..10000000");
}

Hyperparameters HyperparametersFromFlags() {
  Hyperparameters h;
  h.job = ParseJobKind(FLAGS_job);
  h.predictor_type = ParsePredictorType(FLAGS_predictor_type);
  h.num_classes = FLAGS_num_classes;
  h.num_factors = FLAGS_num_factors;
  h.feature_dim = FLAGS_feature_dim;
  h.mini_batch_size = MiniBatchSizeFromFlags();
  h.epochs =
      IsSet("epochs") || h.job != JobKind::kFactorizationMachines ? FLAGS_epochs : kFmDefaultEpochs;
  h.use_bias = FLAGS_use_bias;
  h.seed = FLAGS_seed;
  h.early_stopping_patience = FLAGS_early_stopping_patience;
  h.early_stopping_tolerance = FLAGS_early_stopping_tolerance;
  h.loss = FLAGS_loss;
  h.margin = static_cast<float>(FLAGS_margin);
  h.quantile = static_cast<float>(FLAGS_quantile);
  h.loss_insensitivity = static_cast<float>(FLAGS_loss_insensitivity);
  h.huber_delta = static_cast<float>(FLAGS_huber_delta);
  h.f_beta = FLAGS_f_beta;
  h.accuracy_top_k = FLAGS_accuracy_top_k;
  h.selection_criterion = ParseSelectionCriterion(FLAGS_binary_classifier_model_selection_criteria);
  h.target_precision = FLAGS_target_precision;
  h.target_recall = FLAGS_target_recall;
  h.num_calibration_samples = FLAGS_num_calibration_samples;
  h.normalize_data = FLAGS_normalize_data;
  h.normalize_label = FLAGS_normalize_label;
  h.unbias_data = FLAGS_unbias_data;
  h.unbias_label = FLAGS_unbias_label;
  h.num_point_for_scaler = FLAGS_num_point_for_scaler;
  h.frequency_prior = FLAGS_frequency_prior;
  h.fast_beta_models = FLAGS_ftrl_beta == "auto";
  RequireInRange("admit_after", FLAGS_admit_after, 0, 65535, "pushes before a row (0: at once)");
  RequireInRange("admit_sketch_mib", FLAGS_admit_sketch_mib, 1, 512);
  RequireInRange("evict_after", FLAGS_evict_after, 0, kMaxCount, "clocks (0: never)");
  h.admit_after = static_cast<uint32_t>(FLAGS_admit_after);
  h.admit_sketch_mib = static_cast<uint32_t>(FLAGS_admit_sketch_mib);
  h.evict_after = static_cast<uint32_t>(FLAGS_evict_after);
  h.positive_example_weight_mult = FLAGS_positive_example_weight_mult;
  h.balance_multiclass_weights = FLAGS_balance_multiclass_weights;

  OptimizerOptions& weights = h.weights_optimizer;
  weights = WeightsOptimizerFromFlags(h.job, h.predictor_type);
  weights.staleness_aware = FLAGS_staleness_aware_steps;  // the bias's too (a copy below)
  if (h.job == JobKind::kFactorizationMachines) {
    weights.groups = FactorizationMachineGroups(weights, h.num_factors);
  }
  h.bias_optimizer = weights;
  h.bias_optimizer.groups.clear();
  h.bias_optimizer.learning_rate = BiasLearningRate(weights.learning_rate);
  h.bias_optimizer.l1 = 0;
  h.bias_optimizer.l2 = BiasWeightDecay(weights.l2);

  h.bias_init = BiasInitializer();
  h.linear_init = LinearInitializer();
  h.factors_init = Initializer("factors", FLAGS_factors_init_method, FLAGS_factors_init_value,
                               FLAGS_factors_init_scale, FLAGS_factors_init_sigma);
  h = WithModels(h, ParseNumModels(FLAGS_num_models, h));
  h.Validate();
  CheckJobCounts();  // the upper bounds (Validate says what is too small first)
  return h;
}

void CheckComputeFlags() {
  RequireInRange("threads", FLAGS_threads, 0, 1024, "0 is one per hardware thread");
  CheckDevice(FLAGS_device);
}

std::map<uint32_t, TableSpec> JobTablesFromFlags() {
  if (FLAGS_job == "exact_sum") return ExactSumTables();
  if (!IsTrainingJob(FLAGS_job)) return {};
  return TablesFor(HyperparametersFromFlags());
}

OptimizerOptions ServersOptimizerFromFlags() {
  if (!IsTrainingJob(FLAGS_job)) return ServerOptimizerFromFlags();
  OptimizerOptions optimizer = HyperparametersFromFlags().weights_optimizer;
  optimizer.groups.clear();  // the job's tables carry their columns' own
  return optimizer;
}

double HoldoutFromFlags(const std::string& train, const std::string& validation) {
  if (FLAGS_holdout == "auto") {
    // A pipe is read once: its rows cannot be read again to validate.
    return validation.empty() && !IsPipeChannel(train) ? kAutoHoldout : 0.0;
  }
  const double share = AutoOr("holdout", FLAGS_holdout, kAutoHoldout);
  if (!(share >= 0.0 && share <= 0.5)) {
    throw MakeError("--holdout ", FLAGS_holdout, " is not auto or a share in [0, 0.5]");
  }
  if (share > 0 && !validation.empty()) {
    throw MakeError("--holdout ", FLAGS_holdout, " and --validation ", validation,
                    ": a job validates on one or the other (--holdout=0 or auto with --validation)");
  }
  if (share > 0 && IsPipeChannel(train)) {
    throw MakeError("--holdout ", FLAGS_holdout, ": --train ", train,
                    " is a pipe, read once, so its held-out rows cannot be read again to validate");
  }
  return share;
}

TrainerOptions TrainerOptionsFromFlags() {
  TrainerOptions options;
  options.train = FLAGS_train;
  if (options.train.empty()) throw MakeError("--train is required");
  options.validation = FLAGS_validation;
  options.holdout = HoldoutFromFlags(options.train, options.validation);
  options.test = FLAGS_test;
  RequireInRange("split_within_host", FLAGS_split_within_host, 0, kMaxCount);
  options.split_within_host = FLAGS_split_within_host;
  options.reader = ReaderOptionsFromFlags();
  options.cache_dir = FLAGS_cache_dir;
  RequireInRange("cache_max_bytes", FLAGS_cache_max_bytes, uint64_t{1} << 20, UINT64_MAX);
  options.cache_max_bytes = FLAGS_cache_max_bytes;
  options.model_dir = FLAGS_model_dir;
  options.staleness = StalenessFromFlags();
  RequireInRange("clock_every", FLAGS_clock_every, 1, kMaxCount);
  options.clock_every = FLAGS_clock_every;
  options.minibatches_in_flight = MinibatchesInFlightFromFlags(options.staleness);
  options.push_filter.threshold = PushFilterThresholdFromFlags(FLAGS_job);
  options.device = FLAGS_device;
  options.threads = FLAGS_threads;
  options.keep_best_epoch = FLAGS_keep_best_epoch;
  if (FLAGS_health_rules != "on" && FLAGS_health_rules != "off") {
    throw MakeError("--health_rules=", FLAGS_health_rules, ": must be on or off");
  }
  options.health_rules = FLAGS_health_rules == "on";
  SlowWorkerFromFlags(&options);
  return options;
}

std::string HyperparameterJson() {
  HyperparametersFromFlags();  // throws for a bad flag
  // predict's and datagen's flags do not shape a training run.
  const std::set<std::string> not_training = {"data",        "out",
                                              "model",       "rows",
                                              "features",    "nnz",
                                              "train_files", "label_offset",
                                              "label_scale", "feature_scale_spread",
                                              "dense_features", "dense_offset_decades",
                                              "cache_dir",   "cache_max_bytes"};
  // The cluster's flags that are the job's hyperparameters.
  const std::set<std::string> cluster_job_flags = {"job", "optimizer", "learning_rate", "wd", "l1"};
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  JsonObject json(JsonObject::Style::kCompact);
  for (const auto& flag : flags) {
    const bool training_flag = flag.filename == __FILE__ && !not_training.count(flag.name);
    if (!training_flag && !cluster_job_flags.count(flag.name)) continue;
    json.Add(flag.name, FlagValueJson(flag));
  }
  return json.Close();
}

bool IsSet(const char* flag) { return !gflags::GetCommandLineFlagInfoOrDie(flag).is_default; }

}  // namespace keel
