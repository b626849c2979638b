// CpuModel: the CPU compute backend. A built-in model's forward and backward
// pass over a minibatch, using the per-example functions of models/ (the same
// ones the CUDA kernels call), on a pool of threads. A linear learner's rows
// of 1 and 8 floats (LinearRowsOf) do LinearScores' and LinearGradients'
// operations in place, in their order: the same bits, tested against the
// generic pass that calls them. Rows of 8 floats (the default's 8 models) run
// a copy of that pass compiled for AVX2 where the CPU has it, the same bits
// again.
//
// With one thread it runs the rows in order and scatter-adds each row's
// gradients into its keys. With more, each thread takes an equal share of
// the rows:
//  - sparse batches: each thread writes every non-zero's gradient into its
//    own slot (no sharing), then the threads sum the slots per unique key,
//    each key's non-zeros in ascending order, and losses and bias gradients
//    are summed per row in row order. That is exactly the one-thread
//    arithmetic, so results are bitwise the same for every thread count.
//  - dense batches (IsDenseBatch): each thread multiplies its rows with Eigen
//    (scores = X W, gradients X^T dS, the FM's factor products alike) into its
//    own accumulator, and the accumulators are added in thread order: the
//    same result for a given thread count, equal to one thread's up to float
//    rounding (sums taken in another order).
#ifndef KEEL_WORKER_CPU_MODEL_H_
#define KEEL_WORKER_CPU_MODEL_H_

#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "worker/compute_backend.h"

namespace keel {

class CpuModel : public ComputeBackend {
 public:
  // `threads`: 1 or more (MakeComputeBackend resolves 0). `wide_vectors`:
  // whether rows of 8 floats may take the pass compiled for AVX2 where the
  // CPU has it (the same bits; false for tests to compare the two).
  explicit CpuModel(const Hyperparameters& hyperparameters, int threads = 1,
                    bool wide_vectors = true);

  std::string name() const override;
  int threads() const { return pool_.size(); }
  std::vector<double> LastModelLosses(double last_total) const override;

  double Predict(const PreparedBatch& batch, const float* weights, const float* bias,
                 std::vector<float>* predictions) override;
  double Gradients(const PreparedBatch& batch, const float* weights, const float* bias,
                   std::vector<float>* weight_gradients,
                   std::vector<float>* bias_gradient) override;

 private:
  // Per-thread scratch, kept between batches.
  struct Scratch {
    std::vector<float> params, gradients, scores, score_gradient, factor_sums, linear, squares;
    std::vector<float> products, row_gradients, accumulator;
  };
  // Where a pass writes: every array is indexed by row (or non-zero) of the
  // whole batch, so threads with different rows never share an element.
  struct Outputs {
    float* predictions = nullptr;         // rows x classes, or null
    float* row_losses = nullptr;          // rows
    float* row_bias_gradients = nullptr;  // rows x bias_width (backward only)
    float* key_gradients = nullptr;       // keys x width: scatter-add here (one thread)...
    float* slot_gradients = nullptr;      // ...or nnz x width: one slot per non-zero
  };
  double Run(const PreparedBatch& batch, const float* weights, const float* bias,
             std::vector<float>* predictions, std::vector<float>* weight_gradients,
             std::vector<float>* bias_gradient);
  // Sizes the outputs Run asks for and points `Outputs` at them (the key
  // gradients are left to the pass that writes them).
  Outputs PrepareOutputs(size_t rows, size_t keys, bool threaded_sparse,
                         std::vector<float>* predictions, std::vector<float>* weight_gradients,
                         std::vector<float>* bias_gradient);
  // The three passes: a dense batch on several threads, any batch on one,
  // a sparse batch on several.
  void RunDense(const PreparedBatch& batch, const float* weights, const float* bias,
                const Outputs& out, std::vector<float>* weight_gradients);
  void RunOneThread(const PreparedBatch& batch, const float* weights, const float* bias,
                    Outputs out, std::vector<float>* weight_gradients);
  void RunSparse(const PreparedBatch& batch, const float* weights, const float* bias, Outputs out,
                 std::vector<float>* weight_gradients);
  // Dense: row 0's keys' weights into gathered_ (and the FM's factor norms).
  void GatherDenseWeights(const PreparedBatch& batch, const float* weights);
  // Dense: the threads' accumulators, added in thread order into each key's row.
  void AddAccumulators(const PreparedBatch& batch, std::vector<float>* weight_gradients) const;
  // Sparse: each key's slots, summed in ascending non-zero order.
  void ReduceSlots(const PreparedBatch& batch, std::vector<float>* weight_gradients);
  // The summed loss (each model's into model_losses_), and (backward) the bias
  // gradient, from the per-row parts.
  double SumRows(size_t rows, std::vector<float>* bias_gradient);
  // Row r's loss under each model (`scores`: every model's, side by side):
  // its losses, score gradients and predictions into `out` and
  // `score_gradient`.
  void RowLosses(size_t r, const float* scores, float label, float* score_gradient,
                 const Outputs& out) const;
  // The per-row pass over rows [begin, end).
  void SparseRows(const PreparedBatch& batch, const float* weights, const float* bias, size_t begin,
                  size_t end, Scratch* scratch, const Outputs& out) const;
  // SparseRows for rows of kWidth floats that give kScores scores (a linear
  // learner's kWidth models or classes side by side, kScores = kWidth; a
  // factorization machine's 1 + k weights, kScores = 1, or kScores models'
  // side by side, kWidth = kScores (1 + k)), or of row_width_ and
  // row_scores_ for 0: at a width known when compiled, the per-row loops over
  // it unroll and vectorise, doing the same operations in the same order.
  template <int kWidth, int kScores>
  void SparseRowsOf(const PreparedBatch& batch, const float* weights, const float* bias,
                    size_t begin, size_t end, Scratch* scratch, const Outputs& out) const;
  // SparseRowsOf for a linear learner's rows of kModels floats (kModels
  // models, or one model's kModels classes): the scores read the pulled rows
  // where they are and the gradients
  // go straight into the keys' (or the slots') rows, without SparseRowsOf's
  // copies; the same operations in the same order, so the same bits.
  // Always inlined (into SparseRows and LinearRowsOfEightWide), so that each
  // caller compiles it for its own target.
  template <int kModels>
  [[gnu::always_inline]] void LinearRowsOf(const PreparedBatch& batch, const float* weights,
                                           const float* bias, size_t begin, size_t end,
                                           Scratch* scratch, const Outputs& out) const;
  // LinearRowsOf<8> compiled for AVX2 (run only when wide_).
  void LinearRowsOfEightWide(const PreparedBatch& batch, const float* weights, const float* bias,
                             size_t begin, size_t end, Scratch* scratch, const Outputs& out) const;
  // The dense pass over rows [begin, end) of a dense batch: adds the gradients
  // of the gathered weights (keys in row 0's order) to scratch->accumulator.
  void DenseRows(const PreparedBatch& batch, const float* gathered, const float* bias, size_t begin,
                 size_t end, Scratch* scratch, const Outputs& out) const;
  // Dense, per row of rows [begin, end): loss, prediction, and (backward) the
  // score gradient D, bias gradients and the FM's score scale.
  // `squares`: the FM's sum_j x_j^2 |v_j|^2 per row of the range and model.
  void DenseRowLosses(const Batch& batch, const float* bias, const float* squares, size_t begin,
                      size_t end, Scratch* scratch, const Outputs& out, float* score_scale) const;

  // Several models are computed together: a row holds every model's weights
  // side by side (row_width_ floats: a linear learner's, or each
  // factorization machine's [w, v_1..v_k]), each row of the batch gets every
  // model's scores (row_scores_) in one pass, features outer and models
  // inner, and each model then takes its own loss. The models differ only in
  // the servers' settings (their rates, penalties and factor init).
  int row_width_ = 0;
  int row_bias_ = 0;
  bool wide_ = false;  // LinearRowsOfEightWide for rows of 8 floats
  int row_scores_ = 0;
  std::vector<double> model_losses_;  // the last call's, per model
  ThreadPool pool_;
  std::vector<Scratch> scratch_;
  std::vector<float> row_losses_, row_bias_gradients_, slots_, gathered_, factor_norms_;
};

}  // namespace keel

#endif  // KEEL_WORKER_CPU_MODEL_H_
