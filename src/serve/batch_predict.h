// `keel predict`: a model scores a file or folder of examples in batches and
// writes one prediction per example (io/inference_format.h), to a file or to
// standard output; labelled data also gets the model's metrics on it.
//
// A free function; single-threaded apart from the Scorer's own threads.
#ifndef KEEL_SERVE_BATCH_PREDICT_H_
#define KEEL_SERVE_BATCH_PREDICT_H_

#include <string>

#include "io/inference_format.h"
#include "io/readers.h"
#include "worker/hyperparameters.h"
#include "worker/model_artifact.h"

namespace keel {

struct PredictOptions {
  std::string model_dir;  // the model's folder (named in messages)
  std::string data;       // the file or folder to score
  std::string out;        // the predictions' file, "-" for standard output
  InferenceFormat format = InferenceFormat::kCsv;
  std::string device;     // the compute backend: "cpu" or "cuda:N"
  int threads = 0;        // the CPU backend's threads
};

// Scores every example of options.data, read with `reader` (whether the data
// is labelled is taken from its first record), with `model` under
// `hyperparameters`, into options.out; then prints a summary line (and the
// metrics, for labelled data) to standard output, or to standard error when
// the predictions go to standard output. Throws Error naming the file that
// cannot be read or written.
void PredictFile(ModelArtifact model, const Hyperparameters& hyperparameters,
                 ReaderOptions reader, const PredictOptions& options);

}  // namespace keel

#endif  // KEEL_SERVE_BATCH_PREDICT_H_
