#include "cli/tool_flags.h"

#include "base/error.h"
#include "cli/cluster_flags.h"
#include "cli/job_flags.h"

namespace keel {
namespace {

// Throws Error when flag `name`, given on the command line as `given`,
// contradicts the model's `recorded` value.
void RefuseContradiction(const char* name, const std::string& given, const std::string& recorded,
                         const std::string& model_dir) {
  if (!IsSet(name) || given == recorded) return;
  throw MakeError("--", name, " ", given, " contradicts the model in ", model_dir, " (", recorded,
                  "): predict scores a model as it was trained; leave the flag out");
}

}  // namespace

PredictOptions PredictOptionsFromFlags() {
  if (FLAGS_model_dir.empty() || FLAGS_data.empty() || FLAGS_out.empty()) {
    throw MakeError(
        "keel predict needs --model_dir, --data and --out (--out=- for standard "
        "output)");
  }
  PredictOptions options;
  options.model_dir = FLAGS_model_dir;
  options.data = FLAGS_data;
  options.out = FLAGS_out;
  options.format = ParseFormatName(FLAGS_accept);
  if (options.format == InferenceFormat::kLibsvm) {
    throw MakeError("--accept libsvm: predictions are written as csv, json, jsonlines or recordio");
  }
  options.device = FLAGS_device;
  options.threads = FLAGS_threads;
  return options;
}

Hyperparameters ScoringHyperparametersFromFlags(const ModelArtifact& artifact,
                                                const std::string& model_dir) {
  Hyperparameters h = artifact.hyperparameters;
  RefuseContradiction("job", FLAGS_job, h.JobName(), model_dir);
  RefuseContradiction("predictor_type", FLAGS_predictor_type, h.PredictorName(), model_dir);
  if (h.predictor_type == PredictorType::kMulticlassClassifier) {
    RefuseContradiction("num_classes", std::to_string(FLAGS_num_classes),
                        std::to_string(h.num_classes), model_dir);
  }
  if (h.job == JobKind::kFactorizationMachines) {
    RefuseContradiction("num_factors", std::to_string(FLAGS_num_factors),
                        std::to_string(h.num_factors), model_dir);
  }
  if (IsSet("loss")) {
    RefuseContradiction("loss", LossName(LossKindOf(h.predictor_type, FLAGS_loss)),
                        LossName(h.loss_function().kind), model_dir);
  }
  if (IsSet("f_beta")) h.f_beta = FLAGS_f_beta;
  if (IsSet("accuracy_top_k")) h.accuracy_top_k = FLAGS_accuracy_top_k;
  h.Validate();
  return h;
}

ReaderOptions PredictReaderOptionsFromFlags(const ModelArtifact& artifact,
                                            const Hyperparameters& h) {
  ReaderOptions reader = ReaderOptionsFromFlags();
  if (!IsSet("data_format")) reader.format = artifact.data_format;
  if (!IsSet("libsvm_zero_based")) reader.zero_based = artifact.libsvm_zero_based;
  reader.feature_dim = 0;
  return WithLabelRule(reader, h);
}

DatagenOptions DatagenOptionsFromFlags() {
  DatagenOptions options;
  options.model = FLAGS_model;
  options.rows = FLAGS_rows;
  options.features = FLAGS_features;
  options.nnz = FLAGS_nnz;
  options.num_factors = FLAGS_num_factors;
  options.seed = FLAGS_seed;
  options.train_files = FLAGS_train_files;
  options.out = FLAGS_out;
  options.predictor_type = ParsePredictorType(FLAGS_predictor_type);
  options.num_classes = FLAGS_num_classes;
  if (IsSet("num_classes") && options.predictor_type != PredictorType::kMulticlassClassifier) {
    throw MakeError("--num_classes ", FLAGS_num_classes,
                    " needs --predictor_type=multiclass_classifier");
  }
  options.label_offset = FLAGS_label_offset;
  options.label_scale = FLAGS_label_scale;
  options.feature_scale_spread = FLAGS_feature_scale_spread;
  if (FLAGS_dense_features < 0) {
    throw MakeError("--dense_features ", FLAGS_dense_features, " must not be negative");
  }
  options.dense_features = FLAGS_dense_features;
  options.dense_offset_decades = FLAGS_dense_offset_decades;
  // The data's format, libsvm unless --data_format names another.
  if (!FLAGS_data_format.empty()) options.format = ParseDataFormat(FLAGS_data_format);
  return options;
}

}  // namespace keel
