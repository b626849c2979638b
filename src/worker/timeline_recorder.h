// TimelineRecorder: a worker's part of the job's timeline
// (<model_dir>/timeline/worker-<rank>.jsonl; io/timeline_writer.h): a
// "start" line, a "sample" every few seconds while it trains (examples so
// far, examples/s since the last sample, the epoch's mean training loss so
// far) and an "epoch" line at the end of each of its epoch shares (its time,
// its time blocked on pulls, its pulls the staleness gate held and the
// staleness they observed). Called from the training thread only.
#ifndef KEEL_WORKER_TIMELINE_RECORDER_H_
#define KEEL_WORKER_TIMELINE_RECORDER_H_

#include <cstdint>
#include <string>

#include "io/timeline_writer.h"
#include "kv/kv_worker.h"
#include "worker/epoch_result.h"

namespace keel {

class TimelineRecorder {
 public:
  // Seconds between samples.
  static constexpr double kSampleIntervalS = 2;

  // `model_dir` "" records nothing. `resumed`: the job resumed (from a
  // checkpoint, or this process took over its rank), so the file goes on.
  TimelineRecorder(const std::string& model_dir, int rank, bool resumed);

  // Each sample also records the longest a push waited for its answer since
  // the one before (KVWorker::TakeLongestPush): the stalls of view changes.
  void set_client(KVWorker* client) { client_ = client; }

  // After each minibatch of `epoch`: `examples` read in the epoch so far by
  // this process, `mean_loss` the epoch's mean training loss so far (model
  // 0). Writes a sample when one is due.
  void AfterBatch(int epoch, uint64_t examples, double mean_loss);
  // At the start of this worker's share of an epoch: notes the client's
  // wire bytes so far, so that the epoch's line carries those of its
  // training alone (not the validation between epochs).
  void BeginEpoch();
  // At the end of this worker's share of `epoch`: a last sample and the
  // epoch's line (with the bytes the client sent to and received from the
  // servers since BeginEpoch); `gate` is the client's gate figures so far (the line
  // carries the epoch's part). Flushes.
  void EndEpoch(int epoch, const EpochResult& result, const GateStats& gate);
  // Writes out what is buffered (at the end of the job).
  void Flush() { writer_.Flush(); }

 private:
  void Sample(int epoch, uint64_t examples, double mean_loss, double now);

  TimelineWriter writer_;
  const int rank_;
  KVWorker* client_ = nullptr;
  uint64_t earlier_examples_ = 0;  // in this process's earlier epochs
  uint64_t last_examples_ = 0;     // at the last sample, this process's whole count
  double last_sample_;             // monotonic seconds
  GateStats last_gate_;            // the gate figures at the last epoch's end
  uint64_t sent_at_begin_ = 0;     // the client's wire bytes at BeginEpoch
  uint64_t received_at_begin_ = 0;
};

}  // namespace keel

#endif  // KEEL_WORKER_TIMELINE_RECORDER_H_
