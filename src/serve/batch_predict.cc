#include "serve/batch_predict.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <utility>
#include <vector>

#include "base/error.h"
#include "io/input_split.h"
#include "models/metrics.h"
#include "worker/batch_stream.h"
#include "worker/evaluator.h"
#include "worker/scorer.h"

namespace keel {
namespace {

// Predict scores at most this many examples at a time, and at most as many
// as keep a batch's predictions within kPredictionBytes: a model of a million
// classes (4 MB of predictions an example) scores 16 at a time. Its batches'
// gathered weights (one row per feature in the batch) shrink with it.
constexpr size_t kPredictBatchRows = 4096;
constexpr size_t kPredictionBytes = size_t{64} << 20;

// The examples predict scores at a time for a model of `prediction_width`
// predictions an example. Throws Error, naming the model's weights.bin and its
// width, when one example's predictions alone exceed kPredictionBytes.
size_t PredictBatchRows(int prediction_width, const std::string& model_dir) {
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(std::max(1, prediction_width));
  if (row_bytes > kPredictionBytes) {
    throw MakeError(model_dir, "/weights.bin: ", prediction_width,
                    " predictions per example (num_classes) need ", row_bytes,
                    " bytes an example, more than predict's ", kPredictionBytes,
                    " bytes for a batch's predictions");
  }
  return std::min(kPredictBatchRows, kPredictionBytes / row_bytes);
}

}  // namespace

void PredictFile(ModelArtifact model, const Hyperparameters& hyperparameters,
                 ReaderOptions reader, const PredictOptions& options) {
  const Scorer scorer(std::move(model), hyperparameters, options.device, options.threads);
  const std::vector<InputSplit> splits = ResolveChannel(options.data, 0, 1);
  // Data to score need not be labelled: the first record says which it is.
  // (The first split of a file that is not empty: an empty part file says nothing.)
  const auto first = std::find_if(splits.begin(), splits.end(), [](const InputSplit& split) {
    return split.is_pipe || split.file_size > 0;
  });
  reader.labelled =
      first == splits.end() || FirstRecordLabelled(*first, reader, scorer.input().input_dim);
  BatchStream stream(splits, reader, PredictBatchRows(scorer.prediction_width(), options.model_dir));

  const bool to_stdout = options.out == "-";
  std::ofstream file;
  if (!to_stdout) {
    file.open(options.out, std::ios::binary);
    if (!file) throw MakeError("cannot write ", options.out);
  }
  std::ostream& out = to_stdout ? std::cout : file;
  PredictionTally tally(hyperparameters);
  double loss_sum = 0.0;
  size_t examples = 0;
  PreparedBatch batch;
  Predictions predictions;
  PredictionWriter writer(options.format, &out);
  uint64_t unseen = 0;
  const std::string destination = to_stdout ? "standard output" : options.out;
  try {
    while (stream.Next(&batch)) {
      loss_sum += scorer.Score(batch, &predictions, &unseen);
      writer.Write(predictions);
      examples += batch.batch.rows();
      if (reader.labelled) tally.Add(predictions.scores, batch.batch.labels);
    }
    writer.Finish();
  } catch (const Error& e) {
    if (!out) throw MakeError("cannot write ", destination);
    throw;
  }
  // With the predictions on standard output, the summary goes to standard error.
  std::ostream& summary = to_stdout ? std::cerr : std::cout;
  summary << "scored " << examples << (reader.labelled ? "" : " unlabelled") << " examples into "
          << destination << " as " << ContentTypeOf(options.format) << " (" << unseen
          << " feature occurrences the model has not seen)\n";
  if (reader.labelled) {
    const MetricSet metrics =
        tally.Metrics(loss_sum / static_cast<double>(std::max<size_t>(1, examples)));
    for (const auto& [name, value] : metrics) summary << "  " << name << " " << value << "\n";
  }
}

}  // namespace keel
