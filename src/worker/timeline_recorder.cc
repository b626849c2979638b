#include "worker/timeline_recorder.h"

#include <unistd.h>

#include "base/json.h"
#include "base/time.h"
#include "kv/wire_precision.h"

namespace keel {
namespace {

std::string HistogramJson(const GateStats& now, const GateStats& before) {
  std::string json = "{";
  for (int b = 0; b < GateStats::kBuckets; ++b) {
    json += (b ? ", \"" : "\"") + std::string(GateStats::BucketName(b)) +
            "\": " + std::to_string(now.histogram[b] - before.histogram[b]);
  }
  return json + "}";
}

}  // namespace

TimelineRecorder::TimelineRecorder(const std::string& model_dir, int rank, bool resumed)
    : writer_(model_dir, "worker-" + std::to_string(rank), !resumed),
      rank_(rank),
      last_sample_(MonotonicSeconds()) {
  writer_.Record("start", "\"role\": \"worker\", \"rank\": " + std::to_string(rank) +
                              ", \"pid\": " + std::to_string(getpid()) +
                              ", \"resumed\": " + (resumed ? "true" : "false"));
}

void TimelineRecorder::AfterBatch(int epoch, uint64_t examples, double mean_loss) {
  if (!writer_.enabled()) return;
  const double now = MonotonicSeconds();
  if (now - last_sample_ >= kSampleIntervalS) Sample(epoch, examples, mean_loss, now);
}

void TimelineRecorder::Sample(int epoch, uint64_t examples, double mean_loss, double now) {
  const uint64_t total = earlier_examples_ + examples;
  const double rate =
      now > last_sample_ ? static_cast<double>(total - last_examples_) / (now - last_sample_) : 0;
  writer_.Record("sample", "\"rank\": " + std::to_string(rank_) + ", \"epoch\": " +
                               std::to_string(epoch) + ", \"examples\": " + std::to_string(total) +
                               ", \"examples_per_second\": " + JsonNumberOrNull(rate) +
                               ", \"loss\": " + JsonNumberOrNull(mean_loss) +
                               (client_ ? ", \"longest_push_ms\": " +
                                              JsonNumberOrNull(client_->TakeLongestPush() * 1e3)
                                        : std::string()));
  last_examples_ = total;
  last_sample_ = now;
}

void TimelineRecorder::BeginEpoch() {
  if (!client_) return;
  sent_at_begin_ = client_->wire_bytes_sent();
  received_at_begin_ = client_->wire_bytes_received();
}

void TimelineRecorder::EndEpoch(int epoch, const EpochResult& result, const GateStats& gate) {
  if (!writer_.enabled()) return;
  // This process's own examples: those read before a resume are not its.
  const uint64_t own = result.examples - result.resumed_examples;
  const double mean_loss =
      result.examples && !result.losses.empty() ? result.losses[0] / result.examples : 0;
  Sample(epoch, own, mean_loss, MonotonicSeconds());
  writer_.Record(
      "epoch",
      "\"rank\": " + std::to_string(rank_) + ", \"epoch\": " + std::to_string(epoch) +
          ", \"examples\": " + std::to_string(result.examples) +
          ", \"seconds\": " + JsonNumberOrNull(result.seconds) +
          ", \"read_wait_seconds\": " + JsonNumberOrNull(result.read_wait) +
          ", \"pull_wait_seconds\": " + JsonNumberOrNull(result.pull_wait) +
          ", \"compute_seconds\": " + JsonNumberOrNull(result.compute) +
          ", \"push_seconds\": " + JsonNumberOrNull(result.push) +
          ", \"pulls\": " + std::to_string(gate.pulls - last_gate_.pulls) + ", \"held_pulls\": " +
          std::to_string(gate.waited - last_gate_.waited) + ", \"held_seconds\": " +
          JsonNumberOrNull(static_cast<double>(gate.waited_us - last_gate_.waited_us) * 1e-6) +
          ", \"staleness_histogram\": " + HistogramJson(gate, last_gate_) +
          (client_ ? ", \"wire_bytes_sent\": " +
                         std::to_string(client_->wire_bytes_sent() - sent_at_begin_) +
                         ", \"wire_bytes_received\": " +
                         std::to_string(client_->wire_bytes_received() - received_at_begin_) +
                         ", \"wire_precision\": \"" + WirePrecisionName(client_->wire_precision()) +
                         "\""
                   : std::string()));
  earlier_examples_ += own;
  last_gate_ = gate;
  writer_.Flush();
}

}  // namespace keel
