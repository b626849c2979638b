#include "worker/progress_reports.h"

namespace keel {
namespace {

// `metrics` without each model's own (model_<k>:*), which a job of many
// models has hundreds of.
void CopySelected(const MetricSet& metrics, google::protobuf::Map<std::string, double>* into) {
  for (const auto& [name, value] : metrics) {
    if (name.rfind("model_", 0) != 0) (*into)[name] = value;
  }
}

}  // namespace

proto::ProgressReport ShareReport(int epochs, uint64_t share_examples) {
  proto::ProgressReport report;
  report.set_epochs(epochs);
  report.set_share_examples(share_examples);
  return report;
}

proto::ProgressReport EpochReport(int epochs, int epoch, uint64_t examples,
                                  uint64_t total_examples, double seconds,
                                  const MetricSet& figures, bool stop) {
  proto::ProgressReport report;
  report.set_epochs(epochs);
  proto::EpochFigures* decided = report.mutable_decided();
  decided->set_epoch(epoch);
  decided->set_examples(examples);
  decided->set_total_examples(total_examples);
  decided->set_stop(stop);
  decided->set_seconds(seconds);
  CopySelected(figures, decided->mutable_metrics());
  return report;
}

proto::ProgressReport OutcomeReport(int epochs, int epochs_run, bool stopped_early,
                                    const MetricSet& metrics, const std::string& model_dir) {
  proto::ProgressReport report;
  report.set_epochs(epochs);
  proto::JobOutcome* outcome = report.mutable_outcome();
  outcome->set_done(true);
  outcome->set_epochs_run(epochs_run);
  outcome->set_stopped_early(stopped_early);
  outcome->set_model_dir(model_dir);
  CopySelected(metrics, outcome->mutable_metrics());
  return report;
}

}  // namespace keel
