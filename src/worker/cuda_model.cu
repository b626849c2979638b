// The CUDA backend. Per minibatch:
//  1. Prefetch (while the previous batch computes): the batch's CSR (row
//     offsets, positions, values, labels) and its per-key order are packed
//     into a pinned host buffer and copied to the device on the copy stream.
//     Two slots, used in turn: double buffering.
//  2. Predict/Gradients: the pulled rows (keys x width, a dense matrix) go
//     through a pinned buffer to the device on the compute stream, which first
//     waits for the slot's copy.
//  3. Sparse batches: a gather kernel lays each non-zero's row out in CSR
//     order, so a row's parameters are contiguous, as the models/ functions
//     expect; the row kernel runs a group of lanes per row over them (lanes
//     split the factors or classes); the key kernel sums each key's per-
//     non-zero gradients in ascending order. Dense batches: cuBLAS products.
//  4. Losses, predictions and the per-key gradients come back through a
//     pinned buffer; the host waits on the compute stream.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "base/error.h"
#include "models/factorization_machine.h"
#include "models/linear.h"
#include "models/losses.h"
#include "worker/cuda_model.h"

// Every CUDA and cuBLAS call goes through these: a failure becomes a
// keel::Error naming the call, its file and line, and the runtime's message.
#define KEEL_CUDA_CHECK(call) ::keel::CheckCuda((call), #call, __FILE__, __LINE__)
#define KEEL_CUBLAS_CHECK(call) ::keel::CheckCublas((call), #call, __FILE__, __LINE__)
// After a kernel launch: launch errors (bad configuration, no device).
#define KEEL_CUDA_CHECK_LAUNCH(kernel) \
  ::keel::CheckCuda(cudaGetLastError(), kernel "<<<...>>>", __FILE__, __LINE__)

namespace keel {

void CheckCuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw MakeError(file, ":", line, ": ", call, " failed: ", cudaGetErrorName(status), ": ",
                  cudaGetErrorString(status));
}

namespace {

// cuBLAS is opened by the first CUDA model, not linked: loading its libraries
// runs static constructors that cost every process about 0.15 s and 200 MB of
// resident memory at start, roles that never compute on a GPU included.
struct CublasLibrary {
  void* handle = nullptr;
  std::string error;  // why it could not be opened
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasSgemv_v2) sgemv = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

template <typename Function>
void Resolve(CublasLibrary* library, const char* name, Function* function) {
  *function = reinterpret_cast<Function>(dlsym(library->handle, name));
  if (*function == nullptr && library->error.empty()) {
    library->error = std::string("it has no ") + name;
  }
}

CublasLibrary OpenCublasLibrary() {
  CublasLibrary library;
  const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  // By name (the loader's path, then this binary's run path), then where the
  // toolkit was at build time.
  library.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why;
  if (library.handle == nullptr) {
    const char* error = dlerror();
    why = error ? error : "unknown error";
  }
#ifdef KEEL_CUDA_LIBRARY_DIR
  if (library.handle == nullptr) {
    const std::string path = std::string(KEEL_CUDA_LIBRARY_DIR) + "/" + name;
    library.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library.handle == nullptr) {
      const char* error = dlerror();
      why += std::string("; ") + (error ? error : path + ": unknown error");
    }
  }
#endif
  if (library.handle == nullptr) {
    library.error = "cannot open " + name + " (cuBLAS): " + why;
    return library;
  }
  Resolve(&library, "cublasCreate_v2", &library.create);
  Resolve(&library, "cublasDestroy_v2", &library.destroy);
  Resolve(&library, "cublasSetStream_v2", &library.set_stream);
  Resolve(&library, "cublasSgemm_v2", &library.sgemm);
  Resolve(&library, "cublasSgemv_v2", &library.sgemv);
  Resolve(&library, "cublasGetStatusName", &library.status_name);
  Resolve(&library, "cublasGetStatusString", &library.status_string);
  if (!library.error.empty()) library.error = name + ": " + library.error;
  return library;
}

const CublasLibrary& Cublas() {
  static std::once_flag opened;
  static CublasLibrary library;
  std::call_once(opened, [] { library = OpenCublasLibrary(); });
  return library;
}

}  // namespace

bool OpenCublas(std::string* why) {
  const CublasLibrary& library = Cublas();
  if (library.error.empty()) return true;
  if (why != nullptr) *why = library.error;
  return false;
}

void CheckCublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw MakeError(file, ":", line, ": ", call, " failed: ", Cublas().status_name(status), ": ",
                  Cublas().status_string(status));
}

int CudaDeviceCount(std::string* why) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear it
    *why = std::string("the CUDA runtime finds no usable device: ") + cudaGetErrorName(status) +
           ": " + cudaGetErrorString(status);
    return 0;
  }
  if (devices == 0) *why = "the CUDA runtime reports no device";
  return devices;
}

namespace {

constexpr int kThreadsPerBlock = 256;
constexpr size_t kSharedBytesLimit = 48 * 1024;

int Blocks(size_t threads) {
  return static_cast<int>((threads + kThreadsPerBlock - 1) / kThreadsPerBlock);
}

// Memory that grows as needed; its contents do not survive growing. It comes
// from `Allocate` and goes back with `Release`: device memory (DeviceArray)
// or page-locked host memory (PinnedBuffer).
template <typename T, cudaError_t (*Allocate)(void**, size_t), cudaError_t (*Release)(void*)>
class GrowingBuffer {
 public:
  GrowingBuffer() = default;
  GrowingBuffer(const GrowingBuffer&) = delete;
  GrowingBuffer& operator=(const GrowingBuffer&) = delete;
  ~GrowingBuffer() {
    if (data_) Release(data_);
  }
  T* Reserve(size_t count) {
    if (count > capacity_) {
      const size_t grown = std::max(count, capacity_ * 3 / 2);
      if (data_) KEEL_CUDA_CHECK(Release(data_));
      data_ = nullptr;
      capacity_ = 0;
      KEEL_CUDA_CHECK(Allocate(reinterpret_cast<void**>(&data_), grown * sizeof(T)));
      capacity_ = grown;
    }
    return data_;
  }
  T* data() const { return data_; }

 private:
  T* data_ = nullptr;
  size_t capacity_ = 0;
};

// Device memory.
template <typename T>
using DeviceArray = GrowingBuffer<T, cudaMalloc, cudaFree>;

// Page-locked host memory (cudaMallocHost), so copies run asynchronously.
using PinnedBuffer = GrowingBuffer<char, cudaMallocHost, cudaFreeHost>;

// Sections of one packed buffer, each 256-byte aligned.
struct Layout {
  size_t bytes = 0;
  size_t Add(size_t section_bytes) {
    const size_t offset = bytes;
    bytes += (section_bytes + 255) / 256 * 256;
    return offset;
  }
};

// --- Kernels ---

// gathered[e * width + c] = weights[positions[e] * width + c] for e < count.
__global__ void GatherKernel(const float* weights, const uint32_t* positions, size_t count,
                             int width, float* gathered) {
  const size_t index = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= count * width) return;
  const size_t e = index / width;
  const int c = static_cast<int>(index % width);
  gathered[index] = weights[static_cast<size_t>(positions[e]) * width + c];
}

// The model as the row kernels see it (RowArguments, DenseRowArguments).
struct ModelShape {
  int width;      // of one model
  int models;     // FM: side by side in each row, one per blockIdx.y; linear: 1
  int row_width;  // models x width
  int classes;
  int factors;  // FM: k; linear: 0
  bool factorization;
  LossFunction loss;
};

struct RowArguments : ModelShape {
  const uint32_t* row_offsets;
  const float* values;
  const float* labels;
  const float* gathered;  // nnz x row_width: each non-zero's parameters, in CSR order
  const float* bias;      // models x classes floats, or null without bias
  int rows;
  int group;                  // lanes per row: a power of two, at most 32
  int scratch_floats;         // shared floats per row
  float* row_losses;          // rows x models
  float* predictions;         // rows x models x classes, or null
  float* slots;               // nnz x row_width (zeroed), or null for the forward pass only
  float* row_bias_gradients;  // rows x models x classes, or null
};

// One group of `group` lanes per row and model (blockIdx.y: several
// factorization machines side by side, each model's parameters at
// model x width in each row, take one block row each). Lane l of a row's group
// takes factors (FM) or classes (linear) l, l + group, ...; the partial sums
// meet through a butterfly of shuffles, after which every lane holds the same
// total. Every lane of a warp reaches every shuffle and __syncwarp (rows past
// the end run with no non-zeros and write nothing), so full-warp masks are
// right.
__global__ void RowKernel(RowArguments a) {
  extern __shared__ float shared[];
  const int lane = static_cast<int>(threadIdx.x) % a.group;
  const int slot = static_cast<int>(threadIdx.x) / a.group;
  const int row = static_cast<int>(blockIdx.x) * (static_cast<int>(blockDim.x) / a.group) + slot;
  const int model = static_cast<int>(blockIdx.y);
  const bool active = row < a.rows;
  // This row's outputs of this model: its loss, and classes predictions and
  // bias gradients.
  const size_t output = static_cast<size_t>(row) * a.models + model;
  float* scratch = shared + slot * a.scratch_floats;
  float* factor_sums = scratch;                // FM: k floats
  float* scores = scratch + a.factors;         // classes floats
  float* score_gradient = scores + a.classes;  // classes floats
  const size_t begin = active ? a.row_offsets[row] : 0;
  const int nnz = active ? static_cast<int>(a.row_offsets[row + 1] - begin) : 0;
  const float* params = a.gathered + begin * a.row_width + static_cast<size_t>(model) * a.width;
  const float* values = a.values + begin;
  const float* bias = a.bias != nullptr ? a.bias + static_cast<size_t>(model) * a.classes : nullptr;

  if (a.factorization) {
    float linear, sums_squared, squares;
    FmStridedScoreTerms(params, a.row_width, values, nnz, a.factors, lane, a.group, factor_sums,
                        &linear, &sums_squared, &squares);
    for (int offset = a.group / 2; offset > 0; offset /= 2) {
      sums_squared += __shfl_xor_sync(0xffffffffu, sums_squared, offset, a.group);
      squares += __shfl_xor_sync(0xffffffffu, squares, offset, a.group);
    }
    if (lane == 0) {
      scores[0] = FmCombine(bias != nullptr ? bias[0] : 0.0f, linear, sums_squared, squares);
    }
  } else {
    LinearScoreTerms(params, values, nnz, a.classes, lane, a.group, bias, scores);
  }
  __syncwarp();
  if (lane == 0 && active) {
    a.row_losses[output] =
        ExampleLoss(a.loss, scores, a.classes, a.labels[row], score_gradient,
                    a.predictions != nullptr ? a.predictions + output * a.classes : nullptr);
    if (a.slots != nullptr) {
      // The mean loss's gradient: each example weighs 1/rows (divided, as on the CPU).
      for (int c = 0; c < a.classes; ++c) {
        score_gradient[c] /= static_cast<float>(a.rows);
        if (a.row_bias_gradients != nullptr) {
          a.row_bias_gradients[output * a.classes + c] = score_gradient[c];
        }
      }
    }
  }
  __syncwarp();
  if (a.slots == nullptr || !active) return;
  float* gradients = a.slots + begin * a.row_width + static_cast<size_t>(model) * a.width;
  if (a.factorization) {
    FmStridedGradientTerms(params, a.row_width, values, nnz, a.factors, lane, a.group, factor_sums,
                           score_gradient[0], gradients, nullptr);
  } else {
    LinearGradientTerms(values, nnz, a.classes, lane, a.group, score_gradient, gradients, nullptr);
  }
}

// key_gradients[u * width + c] = sum of slots[e * width + c] over key u's
// non-zeros e in ascending order (the CPU's order).
__global__ void KeyReduceKernel(const float* slots, const uint32_t* key_offsets,
                                const uint32_t* nonzeros_by_key, size_t keys, int width,
                                float* key_gradients) {
  const size_t index = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= keys * width) return;
  const size_t u = index / width;
  const int c = static_cast<int>(index % width);
  float sum = 0.0f;
  for (uint32_t e = key_offsets[u]; e < key_offsets[u + 1]; ++e) {
    sum += slots[static_cast<size_t>(nonzeros_by_key[e]) * width + c];
  }
  key_gradients[index] = sum;
}

// bias_gradient[c] = sum over rows in order of row_bias_gradients[r * width + c].
__global__ void BiasReduceKernel(const float* row_bias_gradients, int rows, int width,
                                 float* bias_gradient) {
  for (int c = static_cast<int>(threadIdx.x); c < width; c += static_cast<int>(blockDim.x)) {
    float sum = 0.0f;
    for (int r = 0; r < rows; ++r) sum += row_bias_gradients[static_cast<size_t>(r) * width + c];
    bias_gradient[c] = sum;
  }
}

// Dense batches. norms[j * models + m] = sum_f v_jf^2 of model m's columns of
// the gathered FM rows (each `width` floats, models side by side).
__global__ void FactorNormsKernel(const float* gathered, int keys, int width, int models,
                                  float* norms) {
  const int index = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (index >= keys * models) return;
  const float* factors = gathered + static_cast<size_t>(index) * width;  // key j, model m
  float norm = 0.0f;
  for (int f = 1; f < width; ++f) norm += factors[f] * factors[f];
  norms[index] = norm;
}

__global__ void SquareKernel(const float* values, size_t count, float* squares) {
  const size_t index = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index < count) squares[index] = values[index] * values[index];
}

struct DenseRowArguments : ModelShape {
  const float* products;  // rows x row_width: X W (linear: scores less the bias; FM: [linear, S])
  const float* squares;   // FM: rows x models: sum_j x_j^2 |v_j|^2
  const float* labels;
  const float* bias;
  int rows;
  float* scratch;             // rows x models x 2 classes
  float* row_losses;          // rows x models
  float* predictions;         // rows x models x classes, or null
  float* score_gradients;     // rows x row_width: D, for X^T D; null for the forward pass only
  float* score_scale;         // FM: rows x models: the score gradient
  float* row_bias_gradients;  // rows x models x classes, or null
};

// One thread per row of a dense batch and model (blockIdx.y): the score from
// the products, the loss, and the row of D that X^T D turns into the weights'
// gradient.
__global__ void DenseRowKernel(DenseRowArguments a) {
  const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int model = static_cast<int>(blockIdx.y);
  if (row >= a.rows) return;
  const size_t output = static_cast<size_t>(row) * a.models + model;
  const float* product =
      a.products + static_cast<size_t>(row) * a.row_width + static_cast<size_t>(model) * a.width;
  const float* bias = a.bias != nullptr ? a.bias + static_cast<size_t>(model) * a.classes : nullptr;
  float* scores = a.scratch + output * 2 * a.classes;
  float* score_gradient = scores + a.classes;
  if (a.factorization) {
    float sums_squared = 0.0f;
    for (int f = 1; f <= a.factors; ++f) sums_squared += product[f] * product[f];
    scores[0] =
        FmCombine(bias != nullptr ? bias[0] : 0.0f, product[0], sums_squared, a.squares[output]);
  } else {
    for (int c = 0; c < a.classes; ++c) {
      scores[c] = product[c] + (bias != nullptr ? bias[c] : 0.0f);
    }
  }
  a.row_losses[output] =
      ExampleLoss(a.loss, scores, a.classes, a.labels[row], score_gradient,
                  a.predictions != nullptr ? a.predictions + output * a.classes : nullptr);
  if (a.score_gradients == nullptr) return;
  float* d = a.score_gradients + static_cast<size_t>(row) * a.row_width +
             static_cast<size_t>(model) * a.width;
  for (int c = 0; c < a.classes; ++c) {
    score_gradient[c] /= static_cast<float>(a.rows);
    if (a.row_bias_gradients != nullptr) {
      a.row_bias_gradients[output * a.classes + c] = score_gradient[c];
    }
  }
  if (a.factorization) {
    // dscore/dw_j = x_j, dscore/dv_jf = x_j S_f - v_jf x_j^2.
    a.score_scale[output] = score_gradient[0];
    d[0] = score_gradient[0];
    for (int f = 1; f <= a.factors; ++f) d[f] = score_gradient[0] * product[f];
  } else {
    for (int c = 0; c < a.classes; ++c) d[c] = score_gradient[c];
  }
}

// FM, dense: model m's gradient[j][1 + f] -= v_jf * weighted_squares[j][m]
// (rows of `models` models of `width` floats side by side), then each row j
// goes to its key's place: key_gradients[positions[j]] = gradient[j].
__global__ void DenseScatterKernel(const float* gradient, const float* gathered,
                                   const float* weighted_squares, const uint32_t* positions,
                                   int keys, int width, int models, bool factorization,
                                   float* key_gradients) {
  const int row_width = models * width;
  const size_t index = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= static_cast<size_t>(keys) * row_width) return;
  const size_t j = index / row_width;
  const int c = static_cast<int>(index % row_width);
  float value = gradient[index];
  if (factorization && c % width > 0) {
    value -= gathered[index] * weighted_squares[j * models + c / width];
  }
  key_gradients[static_cast<size_t>(positions[j]) * row_width + c] = value;
}

// --- The backend ---

class CudaModel : public ComputeBackend {
 public:
  CudaModel(const Hyperparameters& hyperparameters, int ordinal)
      : ComputeBackend(hyperparameters), ordinal_(ordinal) {
    // Several factorization machines are computed in one pass (their rows
    // side by side, a block row of the kernels per model); MakeComputeBackend
    // wraps a linear learner's several models in a MultiModelBackend.
    if (hyperparameters.num_models > 1) {
      if (!factorization_) {
        throw MakeError(
            "the CUDA backend computes several linear models only through a "
            "MultiModelBackend");
      }
      models_ = hyperparameters.num_models;
    }
    model_losses_.assign(models_, 0.0);
    // Before any stream or event is made: a constructor that throws runs no
    // destructor to release them.
    std::string why;
    if (!OpenCublas(&why)) throw MakeError("--device cuda:", ordinal_, ": ", why);
    KEEL_CUDA_CHECK(cudaSetDevice(ordinal_));
    cudaDeviceProp properties;
    KEEL_CUDA_CHECK(cudaGetDeviceProperties(&properties, ordinal_));
    device_name_ = properties.name;
    KEEL_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    KEEL_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_stream_, cudaStreamNonBlocking));
    for (Slot& slot : slots_) {
      KEEL_CUDA_CHECK(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming));
    }
    KEEL_CUBLAS_CHECK(Cublas().create(&cublas_));
    KEEL_CUBLAS_CHECK(Cublas().set_stream(cublas_, compute_stream_));
    const int k = factorization_ ? hyperparameters_.num_factors : 0;
    const int split = factorization_ ? k : classes_;  // what a row's lanes share out
    group_ = 1;
    while (group_ < split && group_ < 32) group_ *= 2;
    scratch_floats_ = k + 2 * classes_;
    rows_per_block_ = kThreadsPerBlock / group_;
    while (rows_per_block_ > 1 &&
           static_cast<size_t>(rows_per_block_) * scratch_floats_ * sizeof(float) >
               kSharedBytesLimit) {
      rows_per_block_ /= 2;
    }
    if (static_cast<size_t>(rows_per_block_) * scratch_floats_ * sizeof(float) >
        kSharedBytesLimit) {
      throw MakeError("--num_classes ", classes_, " is more than the CUDA backend supports");
    }
    if (rows_per_block_ * group_ % 32 != 0) rows_per_block_ = (32 + group_ - 1) / group_;
  }

  ~CudaModel() override {
    cudaSetDevice(ordinal_);
    cudaStreamSynchronize(copy_stream_);
    cudaStreamSynchronize(compute_stream_);
    if (cublas_) Cublas().destroy(cublas_);
    for (Slot& slot : slots_) {
      if (slot.copied) cudaEventDestroy(slot.copied);
    }
    if (copy_stream_) cudaStreamDestroy(copy_stream_);
    if (compute_stream_) cudaStreamDestroy(compute_stream_);
  }

  std::string name() const override {
    return "cuda:" + std::to_string(ordinal_) + " (" + device_name_ + ")";
  }

  std::vector<double> LastModelLosses(double last_total) const override {
    if (models_ == 1) return {last_total};
    return model_losses_;
  }

  // The kernels read the weights from a copy on the device.
  void SetClassWeights(const std::vector<float>& weights) override {
    ComputeBackend::SetClassWeights(weights);
    if (weights.empty()) return;
    KEEL_CUDA_CHECK(cudaSetDevice(ordinal_));
    float* device = class_weights_on_device_.Reserve(weights.size());
    KEEL_CUDA_CHECK(
        cudaMemcpy(device, weights.data(), weights.size() * sizeof(float), cudaMemcpyHostToDevice));
    loss_.class_weights = device;
  }

  void Prefetch(const PreparedBatch& batch) override {
    KEEL_CUDA_CHECK(cudaSetDevice(ordinal_));
    if (!Holds(slots_[0], batch) && !Holds(slots_[1], batch)) Stage(batch, FreeSlot());
  }

  double Predict(const PreparedBatch& batch, const float* weights, const float* bias,
                 std::vector<float>* predictions) override {
    return Run(batch, weights, bias, predictions, nullptr, nullptr);
  }

  double Gradients(const PreparedBatch& batch, const float* weights, const float* bias,
                   std::vector<float>* weight_gradients,
                   std::vector<float>* bias_gradient) override {
    return Run(batch, weights, bias, nullptr, weight_gradients, bias_gradient);
  }

 private:
  // A batch's structure on the device.
  struct Slot {
    const PreparedBatch* batch = nullptr;  // staged and not yet computed, or null
    uint64_t staged = 0;                   // when, counting stagings
    const float* values = nullptr;         // its identity, with the sizes below
    size_t rows = 0, nnz = 0, keys = 0;
    bool dense = false;
    cudaEvent_t copied = nullptr;
    PinnedBuffer host;
    DeviceArray<char> device;
    size_t row_offsets = 0, positions = 0, values_offset = 0, labels = 0, key_offsets = 0,
           nonzeros_by_key = 0;
  };

  // A slot holding no batch waiting to be computed; if both do, the one staged
  // first (its batch will be staged again when its turn comes).
  int FreeSlot() const {
    const bool free0 = slots_[0].batch == nullptr, free1 = slots_[1].batch == nullptr;
    if (free0 != free1) return free0 ? 0 : 1;
    return slots_[0].staged <= slots_[1].staged ? 0 : 1;
  }

  bool Holds(const Slot& slot, const PreparedBatch& batch) const {
    return slot.batch == &batch && slot.values == batch.batch.values.data() &&
           slot.rows == batch.batch.rows() && slot.nnz == batch.batch.nnz() &&
           slot.keys == batch.keys.size();
  }

  // Packs the batch into the slot's pinned buffer and starts its copy.
  void Stage(const PreparedBatch& prepared, int index) {
    Slot& slot = slots_[index];
    const Batch& batch = prepared.batch;
    CheckKeySet(prepared);
    if (batch.nnz() > UINT32_MAX) throw MakeError("a minibatch of more than 2^32 non-zeros");
    // The slot's previous copy must be done before its buffer is reused.
    KEEL_CUDA_CHECK(cudaEventSynchronize(slot.copied));
    const size_t rows = batch.rows(), nnz = batch.nnz(), keys = prepared.keys.size();
    Layout layout;
    slot.row_offsets = layout.Add((rows + 1) * sizeof(uint32_t));
    slot.positions = layout.Add(nnz * sizeof(uint32_t));
    slot.values_offset = layout.Add(nnz * sizeof(float));
    slot.labels = layout.Add(rows * sizeof(float));
    slot.key_offsets = layout.Add((keys + 1) * sizeof(uint32_t));
    slot.nonzeros_by_key = layout.Add(nnz * sizeof(uint32_t));
    char* host = slot.host.Reserve(layout.bytes);
    uint32_t* row_offsets = reinterpret_cast<uint32_t*>(host + slot.row_offsets);
    for (size_t r = 0; r <= rows; ++r) row_offsets[r] = static_cast<uint32_t>(batch.row_offsets[r]);
    std::memcpy(host + slot.positions, prepared.positions.data(), nnz * sizeof(uint32_t));
    std::memcpy(host + slot.values_offset, batch.values.data(), nnz * sizeof(float));
    std::memcpy(host + slot.labels, batch.labels.data(), rows * sizeof(float));
    std::memcpy(host + slot.key_offsets, prepared.key_offsets.data(),
                (keys + 1) * sizeof(uint32_t));
    std::memcpy(host + slot.nonzeros_by_key, prepared.nonzeros_by_key.data(),
                nnz * sizeof(uint32_t));
    char* device = slot.device.Reserve(layout.bytes);
    KEEL_CUDA_CHECK(
        cudaMemcpyAsync(device, host, layout.bytes, cudaMemcpyHostToDevice, copy_stream_));
    KEEL_CUDA_CHECK(cudaEventRecord(slot.copied, copy_stream_));
    slot.batch = &prepared;
    slot.staged = ++stagings_;
    slot.values = batch.values.data();
    slot.rows = rows;
    slot.nnz = nnz;
    slot.keys = keys;
    slot.dense = IsDenseBatch(prepared);
  }

  LossFunction Loss() const { return loss_; }
  ModelShape Shape() const {
    ModelShape shape;
    shape.width = width_;
    shape.models = models_;
    shape.row_width = weight_width();
    shape.classes = classes_;
    shape.factors = factorization_ ? hyperparameters_.num_factors : 0;
    shape.factorization = factorization_;
    shape.loss = Loss();
    return shape;
  }

  // The structure of a staged batch, on the device (views of its slot's buffer).
  struct DeviceBatch {
    const uint32_t* row_offsets;
    const uint32_t* positions;
    const float* values;
    const float* labels;
    const uint32_t* key_offsets;
    const uint32_t* nonzeros_by_key;
  };

  // What a pass writes on the device. Everything but the per-row bias
  // gradients lies in one buffer that comes back to the host whole.
  struct DeviceResults {
    Layout layout;
    size_t losses_offset = 0, predictions_offset = 0, gradients_offset = 0,
           bias_gradient_offset = 0;
    char* buffer = nullptr;
    float* row_losses = nullptr;          // rows x models
    float* predictions = nullptr;         // rows x prediction_width, or null when not asked for
    float* key_gradients = nullptr;       // keys x weight_width, or null for the forward pass
    float* bias_gradient = nullptr;       // bias_width (backward only)
    float* row_bias_gradients = nullptr;  // rows x bias_width, or null (forward, or no bias)
  };

  double Run(const PreparedBatch& prepared, const float* weights, const float* bias,
             std::vector<float>* predictions, std::vector<float>* weight_gradients,
             std::vector<float>* bias_gradient) {
    KEEL_CUDA_CHECK(cudaSetDevice(ordinal_));
    SizeResults(prepared, predictions, weight_gradients, bias_gradient);
    if (prepared.batch.rows() == 0) return 0;
    Slot& slot = slots_[StagedSlot(prepared)];
    slot.batch = nullptr;  // consumed: never matched again
    const float* device_bias = nullptr;
    const float* device_weights = UploadRows(slot, weights, bias, &device_bias);
    const DeviceBatch structure = StructureOf(slot);
    const bool backward = weight_gradients != nullptr;
    const DeviceResults results = LayOutResults(slot, predictions != nullptr, backward);
    if (slot.dense) {
      RunDense(slot, structure, device_weights, device_bias, results);
    } else {
      RunSparse(slot, structure, device_weights, device_bias, results);
    }
    if (backward) ReduceBias(slot.rows, results);
    return Download(results, slot, predictions, weight_gradients, bias_gradient);
  }

  // The host outputs at their sizes, zeroed.
  void SizeResults(const PreparedBatch& prepared, std::vector<float>* predictions,
                   std::vector<float>* weight_gradients, std::vector<float>* bias_gradient) const {
    if (predictions) predictions->assign(prepared.batch.rows() * prediction_width(), 0.0f);
    if (weight_gradients != nullptr) {
      weight_gradients->assign(prepared.keys.size() * weight_width(), 0.0f);
      bias_gradient->assign(bias_width(), 0.0f);
    }
  }

  // The slot holding `prepared`, staging it first if none does.
  int StagedSlot(const PreparedBatch& prepared) {
    int index = Holds(slots_[0], prepared) ? 0 : Holds(slots_[1], prepared) ? 1 : -1;
    if (index < 0) {
      index = FreeSlot();
      Stage(prepared, index);
    }
    return index;
  }

  // The pulled rows and the bias, through the pinned buffer to the device on
  // the compute stream, which then waits for `slot`'s copy. Returns the rows
  // on the device; sets `*device_bias` (null without bias).
  const float* UploadRows(const Slot& slot, const float* weights, const float* bias,
                          const float** device_bias) {
    const bool use_bias = hyperparameters_.use_bias;
    Layout in;
    const size_t weights_offset = in.Add(slot.keys * weight_width() * sizeof(float));
    const size_t bias_offset = in.Add(bias_width() * sizeof(float));
    char* host_in = input_.Reserve(in.bytes);
    std::memcpy(host_in + weights_offset, weights, slot.keys * weight_width() * sizeof(float));
    if (use_bias) std::memcpy(host_in + bias_offset, bias, bias_width() * sizeof(float));
    char* device_in = device_input_.Reserve(in.bytes);
    KEEL_CUDA_CHECK(
        cudaMemcpyAsync(device_in, host_in, in.bytes, cudaMemcpyHostToDevice, compute_stream_));
    KEEL_CUDA_CHECK(cudaStreamWaitEvent(compute_stream_, slot.copied, 0));
    *device_bias = use_bias ? reinterpret_cast<const float*>(device_in + bias_offset) : nullptr;
    return reinterpret_cast<const float*>(device_in + weights_offset);
  }

  DeviceBatch StructureOf(const Slot& slot) const {
    const char* structure = slot.device.data();
    DeviceBatch batch;
    batch.row_offsets = reinterpret_cast<const uint32_t*>(structure + slot.row_offsets);
    batch.positions = reinterpret_cast<const uint32_t*>(structure + slot.positions);
    batch.values = reinterpret_cast<const float*>(structure + slot.values_offset);
    batch.labels = reinterpret_cast<const float*>(structure + slot.labels);
    batch.key_offsets = reinterpret_cast<const uint32_t*>(structure + slot.key_offsets);
    batch.nonzeros_by_key = reinterpret_cast<const uint32_t*>(structure + slot.nonzeros_by_key);
    return batch;
  }

  // What comes back: losses, predictions (if asked for), gradients (backward).
  DeviceResults LayOutResults(const Slot& slot, bool with_predictions, bool backward) {
    const size_t rows = slot.rows, keys = slot.keys;
    DeviceResults results;
    Layout& out = results.layout;
    results.losses_offset = out.Add(rows * models_ * sizeof(float));
    results.predictions_offset =
        out.Add(with_predictions ? rows * prediction_width() * sizeof(float) : 0);
    results.gradients_offset = out.Add(backward ? keys * weight_width() * sizeof(float) : 0);
    results.bias_gradient_offset = out.Add(backward ? bias_width() * sizeof(float) : 0);
    char* buffer = results.buffer = device_output_.Reserve(out.bytes);
    results.row_losses = reinterpret_cast<float*>(buffer + results.losses_offset);
    results.predictions =
        with_predictions ? reinterpret_cast<float*>(buffer + results.predictions_offset) : nullptr;
    results.key_gradients =
        backward ? reinterpret_cast<float*>(buffer + results.gradients_offset) : nullptr;
    results.bias_gradient = reinterpret_cast<float*>(buffer + results.bias_gradient_offset);
    results.row_bias_gradients = backward && hyperparameters_.use_bias
                                     ? row_bias_gradients_.Reserve(rows * bias_width())
                                     : nullptr;
    return results;
  }

  // A sparse batch: the gather kernel, the row kernel, and (backward) the key kernel.
  void RunSparse(const Slot& slot, const DeviceBatch& structure, const float* weights,
                 const float* bias, const DeviceResults& results) {
    const size_t nnz = slot.nnz, keys = slot.keys;
    const int row_width = weight_width();
    const bool backward = results.key_gradients != nullptr;
    float* gathered = gathered_.Reserve(nnz * row_width);
    GatherKernel<<<Blocks(nnz * row_width), kThreadsPerBlock, 0, compute_stream_>>>(
        weights, structure.positions, nnz, row_width, gathered);
    KEEL_CUDA_CHECK_LAUNCH("GatherKernel");
    float* slots = nullptr;
    if (backward) {
      slots = slots_gradients_.Reserve(nnz * row_width);
      KEEL_CUDA_CHECK(cudaMemsetAsync(slots, 0, nnz * row_width * sizeof(float), compute_stream_));
    }
    const RowArguments a = RowArgumentsFor(slot, structure, gathered, bias, slots, results);
    const dim3 blocks(static_cast<unsigned>((slot.rows + rows_per_block_ - 1) / rows_per_block_),
                      static_cast<unsigned>(models_));
    const size_t shared = static_cast<size_t>(rows_per_block_) * scratch_floats_ * sizeof(float);
    RowKernel<<<blocks, rows_per_block_ * group_, shared, compute_stream_>>>(a);
    KEEL_CUDA_CHECK_LAUNCH("RowKernel");
    if (!backward) return;
    KeyReduceKernel<<<Blocks(keys * row_width), kThreadsPerBlock, 0, compute_stream_>>>(
        slots, structure.key_offsets, structure.nonzeros_by_key, keys, row_width,
        results.key_gradients);
    KEEL_CUDA_CHECK_LAUNCH("KeyReduceKernel");
  }

  RowArguments RowArgumentsFor(const Slot& slot, const DeviceBatch& structure,
                               const float* gathered, const float* bias, float* slots,
                               const DeviceResults& results) const {
    RowArguments a;
    a.row_offsets = structure.row_offsets;
    a.values = structure.values;
    a.labels = structure.labels;
    a.gathered = gathered;
    a.bias = bias;
    a.rows = static_cast<int>(slot.rows);
    static_cast<ModelShape&>(a) = Shape();
    a.group = group_;
    a.scratch_floats = scratch_floats_;
    a.row_losses = results.row_losses;
    a.predictions = results.predictions;
    a.slots = slots;
    a.row_bias_gradients = results.row_bias_gradients;
    return a;
  }

  // The bias gradient: the rows' parts summed in row order, or zeros without bias.
  void ReduceBias(size_t rows, const DeviceResults& results) {
    if (!hyperparameters_.use_bias) {
      KEEL_CUDA_CHECK(
          cudaMemsetAsync(results.bias_gradient, 0, bias_width() * sizeof(float), compute_stream_));
      return;
    }
    BiasReduceKernel<<<1, 128, 0, compute_stream_>>>(
        results.row_bias_gradients, static_cast<int>(rows), bias_width(), results.bias_gradient);
    KEEL_CUDA_CHECK_LAUNCH("BiasReduceKernel");
  }

  // Brings the results back through the pinned buffer, waits for the compute
  // stream, and fills the host outputs. Returns the summed loss.
  double Download(const DeviceResults& results, const Slot& slot, std::vector<float>* predictions,
                  std::vector<float>* weight_gradients, std::vector<float>* bias_gradient) {
    const size_t bytes = results.layout.bytes;
    char* host_out = output_.Reserve(bytes);
    KEEL_CUDA_CHECK(
        cudaMemcpyAsync(host_out, results.buffer, bytes, cudaMemcpyDeviceToHost, compute_stream_));
    KEEL_CUDA_CHECK(cudaStreamSynchronize(compute_stream_));
    const float* losses = reinterpret_cast<const float*>(host_out + results.losses_offset);
    double loss = 0;
    for (int m = 0; m < models_; ++m) {
      double model_loss = 0;
      for (size_t r = 0; r < slot.rows; ++r) model_loss += losses[r * models_ + m];
      model_losses_[m] = model_loss;
      loss += model_loss;
    }
    if (predictions) {
      std::memcpy(predictions->data(), host_out + results.predictions_offset,
                  slot.rows * prediction_width() * sizeof(float));
    }
    if (weight_gradients != nullptr) {
      std::memcpy(weight_gradients->data(), host_out + results.gradients_offset,
                  slot.keys * weight_width() * sizeof(float));
      std::memcpy(bias_gradient->data(), host_out + results.bias_gradient_offset,
                  bias_width() * sizeof(float));
    }
    return loss;
  }

  // A dense batch (every row lists the batch's keys in row 0's order): X is
  // rows x keys, row-major, as the values already lie; W the gathered rows
  // (keys x width, row-major). cuBLAS is column-major, so a row-major M is its
  // column-major transpose: P = X W is computed as P^T = W^T X^T, and the
  // weights' gradient X^T D as (X^T D)^T = D^T X.
  void RunDense(const Slot& slot, const DeviceBatch& structure, const float* weights,
                const float* bias, const DeviceResults& results) {
    const float* gathered = GatherDense(slot, structure, weights);
    const float* products = DenseProducts(slot, structure, gathered);
    const float* squares = factorization_ ? DenseSquares(slot, structure, gathered) : nullptr;
    const DenseRowArguments a = DenseRowPass(slot, structure, products, squares, bias, results);
    if (results.key_gradients == nullptr) return;
    DenseGradients(slot, structure, gathered, a, results.key_gradients);
  }

  // W: the rows of row 0's keys, in its order.
  const float* GatherDense(const Slot& slot, const DeviceBatch& structure, const float* weights) {
    const int keys = static_cast<int>(slot.keys);
    const int row_width = weight_width();
    float* gathered = gathered_.Reserve(static_cast<size_t>(keys) * row_width);
    GatherKernel<<<Blocks(static_cast<size_t>(keys) * row_width), kThreadsPerBlock, 0,
                   compute_stream_>>>(weights, structure.positions, keys, row_width, gathered);
    KEEL_CUDA_CHECK_LAUNCH("GatherKernel");
    return gathered;
  }

  // P = X W (linear: the scores less the bias; FM: [linear, S_1..S_k]).
  const float* DenseProducts(const Slot& slot, const DeviceBatch& structure,
                             const float* gathered) {
    const int rows = static_cast<int>(slot.rows);
    const int keys = static_cast<int>(slot.keys);
    const int row_width = weight_width();
    const float one = 1.0f, zero = 0.0f;
    float* products = dense_products_.Reserve(static_cast<size_t>(rows) * row_width);
    KEEL_CUBLAS_CHECK(Cublas().sgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, row_width, rows, keys, &one,
                                     gathered, row_width, structure.values, keys, &zero, products,
                                     row_width));
    return products;
  }

  // FM: sum_j x_j^2 |v_j|^2 per row and model (leaves X.X in
  // dense_squared_values_ for the gradients).
  const float* DenseSquares(const Slot& slot, const DeviceBatch& structure, const float* gathered) {
    const int rows = static_cast<int>(slot.rows);
    const int keys = static_cast<int>(slot.keys);
    const float one = 1.0f, zero = 0.0f;
    const size_t count = static_cast<size_t>(rows) * keys;
    float* squared_values = dense_squared_values_.Reserve(count);
    SquareKernel<<<Blocks(count), kThreadsPerBlock, 0, compute_stream_>>>(structure.values, count,
                                                                          squared_values);
    KEEL_CUDA_CHECK_LAUNCH("SquareKernel");
    const size_t norms_count = static_cast<size_t>(keys) * models_;
    float* norms = dense_norms_.Reserve(norms_count);
    FactorNormsKernel<<<Blocks(norms_count), kThreadsPerBlock, 0, compute_stream_>>>(
        gathered, keys, width_, models_, norms);
    KEEL_CUDA_CHECK_LAUNCH("FactorNormsKernel");
    float* squares = dense_squares_.Reserve(static_cast<size_t>(rows) * models_);
    if (models_ == 1) {
      // squares = (X.X) norms: (X.X) is keys x rows column-major, so transpose it.
      KEEL_CUBLAS_CHECK(Cublas().sgemv(cublas_, CUBLAS_OP_T, keys, rows, &one, squared_values, keys,
                                       norms, 1, &zero, squares, 1));
    } else {
      // squares (rows x models row-major: models x rows column-major) =
      // norms (models x keys column-major) (X.X)^T (keys x rows column-major).
      KEEL_CUBLAS_CHECK(Cublas().sgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, models_, rows, keys, &one,
                                       norms, models_, squared_values, keys, &zero, squares,
                                       models_));
    }
    return squares;
  }

  // The dense row kernel: losses, predictions and (backward) D. Returns its
  // arguments, which say where D and the FM's score scale lie.
  DenseRowArguments DenseRowPass(const Slot& slot, const DeviceBatch& structure,
                                 const float* products, const float* squares, const float* bias,
                                 const DeviceResults& results) {
    const int rows = static_cast<int>(slot.rows);
    const bool backward = results.key_gradients != nullptr;
    DenseRowArguments a;
    a.products = products;
    a.squares = squares;
    a.labels = structure.labels;
    a.bias = bias;
    a.rows = rows;
    static_cast<ModelShape&>(a) = Shape();
    a.scratch = dense_scratch_.Reserve(static_cast<size_t>(rows) * models_ * 2 * classes_);
    a.row_losses = results.row_losses;
    a.predictions = results.predictions;
    a.score_gradients =
        backward ? dense_score_gradients_.Reserve(static_cast<size_t>(rows) * a.row_width)
                 : nullptr;
    a.score_scale = backward && factorization_
                        ? dense_score_scale_.Reserve(static_cast<size_t>(rows) * models_)
                        : nullptr;
    a.row_bias_gradients = results.row_bias_gradients;
    const dim3 blocks(static_cast<unsigned>(Blocks(rows)), static_cast<unsigned>(models_));
    DenseRowKernel<<<blocks, kThreadsPerBlock, 0, compute_stream_>>>(a);
    KEEL_CUDA_CHECK_LAUNCH("DenseRowKernel");
    return a;
  }

  // X^T D (less the FM's v_jf x_j^2 terms), scattered to each key's place.
  void DenseGradients(const Slot& slot, const DeviceBatch& structure, const float* gathered,
                      const DenseRowArguments& a, float* key_gradients) {
    const int rows = static_cast<int>(slot.rows);
    const int keys = static_cast<int>(slot.keys);
    const int row_width = weight_width();
    const float one = 1.0f, zero = 0.0f;
    float* gradient = dense_gradient_.Reserve(static_cast<size_t>(keys) * row_width);
    KEEL_CUBLAS_CHECK(Cublas().sgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, row_width, keys, rows, &one,
                                     a.score_gradients, row_width, structure.values, keys, &zero,
                                     gradient, row_width));
    float* weighted_squares = nullptr;
    if (factorization_) {
      weighted_squares = dense_weighted_squares_.Reserve(static_cast<size_t>(keys) * models_);
      if (models_ == 1) {
        // weighted_squares = (X.X)^T g: keys x rows column-major, as it lies.
        KEEL_CUBLAS_CHECK(Cublas().sgemv(cublas_, CUBLAS_OP_N, keys, rows, &one,
                                         dense_squared_values_.data(), keys, a.score_scale, 1,
                                         &zero, weighted_squares, 1));
      } else {
        // weighted_squares (keys x models row-major: models x keys column-major)
        // = g (models x rows column-major) (X.X) (rows x keys: the transpose of
        // X.X as it lies).
        KEEL_CUBLAS_CHECK(Cublas().sgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, models_, keys, rows,
                                         &one, a.score_scale, models_, dense_squared_values_.data(),
                                         keys, &zero, weighted_squares, models_));
      }
    }
    DenseScatterKernel<<<Blocks(static_cast<size_t>(keys) * row_width), kThreadsPerBlock, 0,
                         compute_stream_>>>(gradient, gathered, weighted_squares,
                                            structure.positions, keys, width_, models_,
                                            factorization_, key_gradients);
    KEEL_CUDA_CHECK_LAUNCH("DenseScatterKernel");
  }

  const int ordinal_;
  std::string device_name_;
  cudaStream_t copy_stream_ = nullptr;
  cudaStream_t compute_stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::vector<double> model_losses_;  // the last call's, per model
  int group_ = 1;
  int scratch_floats_ = 0;
  int rows_per_block_ = kThreadsPerBlock;
  Slot slots_[2];
  uint64_t stagings_ = 0;
  PinnedBuffer input_, output_;
  DeviceArray<char> device_input_, device_output_;
  DeviceArray<float> class_weights_on_device_;
  DeviceArray<float> gathered_, slots_gradients_, row_bias_gradients_;
  DeviceArray<float> dense_products_, dense_squared_values_, dense_norms_, dense_squares_,
      dense_scratch_, dense_score_gradients_, dense_score_scale_, dense_gradient_,
      dense_weighted_squares_;
};

}  // namespace

std::unique_ptr<ComputeBackend> MakeCudaModel(const Hyperparameters& hyperparameters, int ordinal) {
  std::string why;
  const int devices = CudaDeviceCount(&why);
  if (devices == 0) {
    throw MakeError("--device cuda:", ordinal, ": ", why, "; use --device=cpu");
  }
  if (ordinal >= devices) {
    throw MakeError("--device cuda:", ordinal, ": this machine has ", devices,
                    " CUDA device(s), numbered from 0");
  }
  return std::make_unique<CudaModel>(hyperparameters, ordinal);
}

}  // namespace keel
