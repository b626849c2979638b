// Random minibatches for the compute backends' tests.
#ifndef KEEL_TESTS_RANDOM_BATCH_H_
#define KEEL_TESTS_RANDOM_BATCH_H_

#include <algorithm>
#include <random>
#include <vector>

#include "worker/prepared_batch.h"

namespace keel::testing {

// A label for the task: real in [-1, 1] for regression, else a class id (0/1
// when classes is 1).
inline float RandomLabel(int classes, bool regression, std::mt19937_64* random) {
  if (regression) return std::uniform_real_distribution<float>(-1.0f, 1.0f)(*random);
  return static_cast<float>((*random)() % (classes > 1 ? classes : 2));
}

// `rows` rows of 1..max_nnz distinct features out of `features`, values in
// [-1, 1], labels for the task: real for regression, else a class id (0/1
// when classes is 1). Prepared (PrepareKeys).
inline PreparedBatch RandomBatch(size_t rows, uint64_t features, int max_nnz, int classes,
                                 bool regression, std::mt19937_64* random) {
  PreparedBatch prepared;
  std::uniform_int_distribution<uint64_t> feature(0, features - 1);
  std::uniform_int_distribution<int> nnz(1, max_nnz);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (size_t r = 0; r < rows; ++r) {
    std::vector<uint64_t> indices;
    std::vector<float> values;
    const int count = nnz(*random);
    while (static_cast<int>(indices.size()) < count) {
      const uint64_t f = feature(*random);
      if (std::find(indices.begin(), indices.end(), f) != indices.end()) continue;
      indices.push_back(f);
      values.push_back(value(*random));
    }
    prepared.batch.AddRow(RandomLabel(classes, regression, random), indices.data(), values.data(),
                          indices.size());
  }
  PrepareKeys(&prepared);
  return prepared;
}

// A dense batch: every row has features 0 .. features - 1 in order (as a CSV
// file gives them).
inline PreparedBatch RandomDenseBatch(size_t rows, uint64_t features, int classes, bool regression,
                                      std::mt19937_64* random) {
  PreparedBatch prepared;
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<uint64_t> indices(features);
  for (uint64_t f = 0; f < features; ++f) indices[f] = f;
  std::vector<float> values(features);
  for (size_t r = 0; r < rows; ++r) {
    for (float& v : values) v = value(*random);
    prepared.batch.AddRow(RandomLabel(classes, regression, random), indices.data(), values.data(),
                          indices.size());
  }
  PrepareKeys(&prepared);
  return prepared;
}

// Random weights for a batch: keys x width, and a bias.
inline std::vector<float> RandomWeights(size_t count, std::mt19937_64* random, float sigma = 0.3f) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> weights(count);
  for (float& w : weights) w = normal(*random);
  return weights;
}

}  // namespace keel::testing

#endif  // KEEL_TESTS_RANDOM_BATCH_H_
