// MinibatchPipeline: a worker's minibatches through pull, compute and push,
// overlapped. The rows of the next `depth` minibatches are pulled (and a
// device backend copies the next one's structure) while the current one
// computes, and the pushes of up to `depth` minibatches are in flight while
// the next one computes: the rows a minibatch computes with miss the updates
// of the `depth` minibatches just before it (that many minibatches of this
// worker's own staleness; the servers' staleness-aware steps count them as
// one update, server/push_staleness.h).
// Each pull is stamped with the clock of the minibatch that will read its
// rows (the clock once the minibatches before it are pushed), so a server's
// staleness gate holds it exactly as long as for a pipeline one deep: any
// depth keeps the consistency model's bound. More than 1 overlaps work only
// where the gate lets pulls through early (staleness above 0, or none): the
// servers then set the pace and the worker seldom waits for them.
//
// With a push filter (worker/push_filter.h) the weights' rows whose change is
// small stay here as remainders; FlushRemainders pushes them all, and
// WaitForPushes does so first: every push the pipeline made is then applied
// with nothing held back. The bias (one row) always goes.
//
// A minibatch's index is its position in the epoch; the first one given to
// Start is minibatch `first`.
//
// The caller drives it one minibatch at a time:
//   for (bool have = pipeline.Start(&stream); have;) {
//     const bool have_next = pipeline.StartNext(&stream, clock, this one's index);
//     pipeline.WaitForRows();
//     loss += pipeline.ComputeGradients();
//     pipeline.PushGradients(clock after);
//     ... pipeline.current() ...
//     pipeline.Advance();
//     have = have_next;
//   }
//   pipeline.WaitForPushes();
// and calls CancelAll() if anything throws on the way. Not safe for
// concurrent use: one thread drives it.
#ifndef KEEL_WORKER_MINIBATCH_PIPELINE_H_
#define KEEL_WORKER_MINIBATCH_PIPELINE_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "kv/kv_worker.h"
#include "worker/batch_stream.h"
#include "worker/compute_backend.h"
#include "worker/epoch_clock.h"
#include "worker/push_filter.h"
#include "worker/training_health.h"

namespace keel {

class MinibatchPipeline {
 public:
  // `client`, `model` and `bias_key` (the bias's one key) must outlive the
  // pipeline. Without `use_bias` the bias is neither pulled nor pushed.
  // `depth` (at least 1): minibatches pulled ahead, and pushes in flight.
  // `filter`: the weights' push filter (off unless its threshold is above
  // 0). Throws Error for a bad filter option.
  MinibatchPipeline(KVWorker* client, ComputeBackend* model, const SharedArray<const Key>& bias_key,
                    bool use_bias, int depth = 1,
                    const PushFilterOptions& filter = PushFilterOptions());

  // Reads the first minibatch and starts pulling its rows. False if `stream`
  // has none.
  bool Start(BatchStream* stream);
  // Reads minibatches after the current one, minibatch `current` of the
  // epoch, until `depth` are pulled ahead (or the stream ends), starting the
  // pull of minibatch j stamped clock.After(j), and has the backend prefetch
  // the one after the current one. Leaves the client's clock at
  // clock.After(current + 1), this worker's clock once the current one is
  // pushed. False if there is no minibatch after the current one.
  bool StartNext(BatchStream* stream, const EpochClock& clock, uint64_t current);
  // Blocks until the current minibatch's rows have arrived.
  void WaitForRows();
  // The mean loss's gradients of the current minibatch on the backend.
  // Returns its summed loss.
  double ComputeGradients();
  // The figures of the gradients ComputeGradients just made, per health
  // table (worker/training_health.h); call before PushGradients.
  MinibatchGradients GradientHealth() const;
  // The same figures for each of `models` models side by side: model k's
  // columns of the weight rows and of the bias row alone.
  std::vector<MinibatchGradients> ModelGradientHealth(int models) const;
  // Zeroes model k's columns (of `models`) of the current gradients: a model
  // left out has nothing pushed.
  void ZeroModel(int k, int models);
  // Waits until fewer than `depth` minibatches' pushes are in flight, then
  // pushes the current one's gradients, the bias and the weights (one
  // message per key range) each stamped with `clock`, the worker's clock
  // after the minibatch: a server counts it in each (key range, table) once
  // that one's push is applied (StalenessGate). Both carry the clock of the
  // pulls that read their rows, for the servers' staleness-aware steps.
  // With `flush`, the weights' push carries every remainder the push filter
  // holds too: the pulls of the minibatches after it, gated on its clock,
  // then read them (a worker about to stop for a checkpoint).
  void PushGradients(int64_t clock, bool flush = false);
  // The minibatch being computed.
  const PreparedBatch& current() const { return slots_[current_].batch; }
  // The next minibatch becomes the current one.
  void Advance();
  // Pushes every remainder the push filter holds (none without one), stamped
  // with the client's clock, as one more push in flight.
  void FlushRemainders();
  // Flushes the remainders, then blocks until every push so far has been
  // applied.
  void WaitForPushes();
  const PushFilter& filter() const { return filter_; }
  // Forgets every request still in flight: for an error, before the arrays
  // they would fill go out of scope.
  void CancelAll();
  // Seconds spent blocked on the stream for minibatches (reading and
  // preparing them did not keep up).
  double read_seconds() const { return read_seconds_; }

 private:
  // A minibatch and its pulls. The depth + 1 slots are used in turn: a pull
  // writes into its slot's arrays, so a slot stays put until its pulls are
  // waited for.
  struct Slot {
    PreparedBatch batch;
    SharedArray<float> weights, bias;
    KVWorker::Handle weights_pull = 0, bias_pull = 0;
    int64_t pull_clock = 0;  // the clock its pulls were stamped with
  };
  // A minibatch's pushes: waited for together.
  struct Pushes {
    KVWorker::Handle bias = 0, weights = 0;
  };
  // Waits until fewer than `depth` minibatches' pushes are in flight.
  void MakeRoomForPush();
  void StartPulls(Slot* slot);
  bool ReadNext(BatchStream* stream, PreparedBatch* batch);
  void WaitFor(const Pushes& pushes);
  size_t SlotAfter(size_t slot, size_t steps = 1) const { return (slot + steps) % slots_.size(); }

  KVWorker* client_;
  ComputeBackend* model_;
  const SharedArray<const Key>& bias_key_;
  const bool use_bias_;
  const int width_;
  const int bias_width_;
  const size_t depth_;
  std::vector<Slot> slots_;
  size_t current_ = 0;
  size_t ahead_ = 0;           // slots after the current one read and pulled
  bool stream_done_ = false;   // the stream said it has no more
  std::deque<Pushes> pushes_;  // oldest first
  std::vector<float> weight_gradients_, bias_gradient_;
  std::vector<float> zero_bias_;  // the bias without --use_bias
  PushFilter filter_;
  double read_seconds_ = 0;
};

}  // namespace keel

#endif  // KEEL_WORKER_MINIBATCH_PIPELINE_H_
