// MinibatchPipeline: a worker's minibatches through pull, compute and push,
// overlapped. The next minibatch's rows are pulled (and a device backend
// copies its structure) while the current one computes, and a minibatch's
// pushes are in flight while the next one computes: the rows a minibatch
// computes with miss the update of the one just before it (one minibatch of
// staleness).
//
// The caller drives it one minibatch at a time:
//   for (bool have = pipeline.Start(&stream); have;) {
//     const bool have_next = pipeline.StartNext(&stream, clock after this one);
//     pipeline.WaitForRows();
//     loss += pipeline.ComputeGradients();
//     pipeline.PushGradients(clock before, clock after);
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
#include <vector>

#include "kv/kv_worker.h"
#include "worker/batch_stream.h"
#include "worker/compute_backend.h"
#include "worker/training_health.h"

namespace keel {

class MinibatchPipeline {
 public:
  // `client`, `model` and `bias_key` (the bias's one key) must outlive the
  // pipeline. Without `use_bias` the bias is neither pulled nor pushed.
  MinibatchPipeline(KVWorker* client, ComputeBackend* model, const SharedArray<const Key>& bias_key,
                    bool use_bias);

  // Reads the first minibatch and starts pulling its rows. False if `stream`
  // has none.
  bool Start(BatchStream* stream);
  // Reads the minibatch after the current one and, if there is one, starts
  // pulling its rows stamped with `clock` (this worker's clock once the
  // current one is pushed) and has the backend prefetch it. False if there is
  // none.
  bool StartNext(BatchStream* stream, int64_t clock);
  // Blocks until the current minibatch's rows have arrived.
  void WaitForRows();
  // The mean loss's gradients of the current minibatch on the backend.
  // Returns its summed loss.
  double ComputeGradients();
  // The figures of the gradients ComputeGradients just made, per health
  // table (worker/training_health.h); call before PushGradients.
  MinibatchGradients GradientHealth() const;
  // Waits for the previous minibatch's pushes, then pushes the current one's
  // gradients. A server advances a worker's clock on the first message stamped
  // with it, and may then answer pulls held for it: so the bias goes first,
  // stamped with `clock_before`, and the weights (one message per server)
  // carry `clock_after`. Both carry the clock of the pulls that read their
  // rows, for the servers' staleness-aware steps.
  void PushGradients(int64_t clock_before, int64_t clock_after);
  // The minibatch being computed.
  const PreparedBatch& current() const { return slots_[current_].batch; }
  // The next minibatch becomes the current one.
  void Advance() { current_ = 1 - current_; }
  // Blocks until every push so far has been applied.
  void WaitForPushes();
  // Forgets every request still in flight: for an error, before the arrays
  // they would fill go out of scope.
  void CancelAll();
  // Seconds spent blocked on the stream for minibatches (reading and
  // preparing them did not keep up).
  double read_seconds() const { return read_seconds_; }

 private:
  // A minibatch and its pulls. The two slots are used in turn: a pull writes
  // into its slot's arrays, so a slot stays put until its pulls are waited for.
  struct Slot {
    PreparedBatch batch;
    SharedArray<float> weights, bias;
    KVWorker::Handle weights_pull = 0, bias_pull = 0;
    int64_t pull_clock = 0;  // the clock its pulls were stamped with
  };
  void StartPulls(Slot* slot);
  bool ReadNext(BatchStream* stream, PreparedBatch* batch);

  KVWorker* client_;
  ComputeBackend* model_;
  const SharedArray<const Key>& bias_key_;
  const bool use_bias_;
  const int width_;
  const int bias_width_;
  Slot slots_[2];
  int current_ = 0;
  std::vector<KVWorker::Handle> pushes_;
  std::vector<float> weight_gradients_, bias_gradient_;
  std::vector<float> zero_bias_;  // the bias without --use_bias
  double read_seconds_ = 0;
};

}  // namespace keel

#endif  // KEEL_WORKER_MINIBATCH_PIPELINE_H_
