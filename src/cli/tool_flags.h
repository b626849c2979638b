// The options of `keel predict` and `keel datagen`, from their flags (defined
// in cli/job_flags.cc): what the commands (cli/job_commands.cc) take instead
// of reading flags.
#ifndef KEEL_CLI_TOOL_FLAGS_H_
#define KEEL_CLI_TOOL_FLAGS_H_

#include <string>

#include "io/inference_format.h"
#include "io/readers.h"
#include "serve/batch_predict.h"
#include "worker/datagen.h"
#include "worker/hyperparameters.h"
#include "worker/model_artifact.h"

namespace keel {

// Throws Error for a missing --model_dir, --data or --out, or an --accept
// predictions cannot be written as.
PredictOptions PredictOptionsFromFlags();

// The model's hyperparameters, with the flags predict may change (--f_beta and
// --accuracy_top_k: metrics only) applied. Throws Error for a flag that
// contradicts the model in `model_dir`: --job, --predictor_type,
// --num_classes, --num_factors, --loss.
Hyperparameters ScoringHyperparametersFromFlags(const ModelArtifact& artifact,
                                                const std::string& model_dir);

// How predict reads --data: the model's data format and libsvm indexing unless
// the flags say otherwise, the model's label rule, no feature_dim (a feature
// the model has not seen weighs zero).
ReaderOptions PredictReaderOptionsFromFlags(const ModelArtifact& artifact,
                                            const Hyperparameters& h);

// `keel datagen`'s data set. Throws Error for --num_classes without
// --predictor_type=multiclass_classifier, or a bad --predictor_type.
DatagenOptions DatagenOptionsFromFlags();

}  // namespace keel

#endif  // KEEL_CLI_TOOL_FLAGS_H_
