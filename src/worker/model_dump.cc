#include "worker/model_dump.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/error.h"

namespace keel {
namespace {

// Puts the dumped rows in artifact order, sorted by feature index, not by
// mixed key: `keys` become the features in place and the rows (of `width`
// weights) follow a sorted permutation, moved in place cycle by cycle. Beyond
// the rows it holds the permutation alone (4 bytes a row below 2^32 rows): a
// model of 10^9 features is dumped on a worker of modest memory.
template <typename Index>
void SortRowsByFeature(std::vector<uint64_t>* keys, std::vector<float>* weights, size_t width) {
  std::vector<uint64_t>& features = *keys;
  for (uint64_t& key : features) key = UnmixKey(key);
  std::vector<Index> order(features.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<Index>(i);
  std::sort(order.begin(), order.end(),
            [&](Index a, Index b) { return features[a] < features[b]; });
  // Row i takes row order[i]; a row in place is marked order[i] == i.
  std::vector<float> held(width);
  for (size_t start = 0; start < order.size(); ++start) {
    if (order[start] == start) continue;
    const uint64_t held_feature = features[start];
    std::copy_n(weights->begin() + start * width, width, held.begin());
    size_t at = start;
    for (;;) {
      const size_t from = order[at];
      order[at] = static_cast<Index>(at);
      if (from == start) {
        features[at] = held_feature;
        std::copy_n(held.begin(), width, weights->begin() + at * width);
        break;
      }
      features[at] = features[from];
      std::copy_n(weights->begin() + from * width, width, weights->begin() + at * width);
      at = from;
    }
  }
}

}  // namespace

void SortDumpedRowsByFeature(std::vector<Key>* keys, std::vector<float>* weights, int width) {
  static_assert(std::is_same_v<Key, uint64_t>, "the features are the keys' storage");
  if (weights->size() != keys->size() * static_cast<size_t>(width)) {
    throw MakeError("a dump of ", keys->size(), " keys holds ", weights->size(),
                    " weights, not ", width, " a key");
  }
  if (keys->size() < std::numeric_limits<uint32_t>::max()) {
    SortRowsByFeature<uint32_t>(keys, weights, static_cast<size_t>(width));
  } else {
    SortRowsByFeature<uint64_t>(keys, weights, static_cast<size_t>(width));
  }
}

ModelArtifact DumpModel(KVWorker* client, const Hyperparameters& hyperparameters,
                        const std::string& hyperparameter_json, int weight_width, int bias_width) {
  ModelArtifact artifact;
  artifact.hyperparameters = hyperparameters;
  artifact.hyperparameter_json = hyperparameter_json;
  std::vector<Key> keys;
  std::vector<float> weights;
  client->Dump(kWeightTable, weight_width, &keys, &weights);
  SortDumpedRowsByFeature(&keys, &weights, weight_width);
  artifact.features = std::move(keys);
  artifact.weights = std::move(weights);
  artifact.bias.assign(bias_width, 0.0f);
  if (hyperparameters.use_bias) {
    const SharedArray<const Key> bias_key = BiasKey();
    SharedArray<float> bias;
    client->Wait(client->Pull(bias_key, &bias, bias_width, kBiasTable));
    artifact.bias.assign(bias.begin(), bias.end());
  }
  return artifact;
}

ModelArtifact SliceModel(const ModelArtifact& all, int k) {
  const Hyperparameters& h = all.hyperparameters;
  const size_t width = static_cast<size_t>(h.weight_width());
  const size_t bias_width = static_cast<size_t>(h.bias_width());
  const size_t models = static_cast<size_t>(h.num_models);
  if (all.weights.size() != all.features.size() * width * models ||
      all.bias.size() != bias_width * models) {
    throw MakeError("a model dump of ", all.features.size(), " features does not hold ", models,
                    " models' columns");
  }
  ModelArtifact model;
  model.hyperparameters = h.Model(k);  // throws for a k outside the job's models
  model.features = all.features;
  model.hyperparameter_json = all.hyperparameter_json;
  model.data_format = all.data_format;
  model.libsvm_zero_based = all.libsvm_zero_based;
  model.data_statistics_json = all.data_statistics_json;
  model.trained_models = h.num_models;
  model.selected_model = k;
  model.weights.resize(all.features.size() * width);
  for (size_t row = 0; row < all.features.size(); ++row) {
    std::copy_n(all.weights.begin() + (row * models + k) * width, width,
                model.weights.begin() + row * width);
  }
  model.bias.assign(all.bias.begin() + k * bias_width, all.bias.begin() + (k + 1) * bias_width);
  return model;
}

ModelArtifact JoinModels(const std::vector<ModelArtifact>& models, const Hyperparameters& job) {
  const size_t count = static_cast<size_t>(job.num_models);
  if (models.size() != count) {
    throw MakeError(models.size(), " models to join for a job of ", count);
  }
  if (count == 1) return models[0];
  const size_t width = static_cast<size_t>(job.weight_width());
  const size_t bias_width = static_cast<size_t>(job.bias_width());
  ModelArtifact all = models[0];
  all.hyperparameters = job;
  const size_t features = all.features.size();
  all.weights.assign(features * width * count, 0.0f);
  all.bias.assign(bias_width * count, 0.0f);
  for (size_t k = 0; k < count; ++k) {
    const ModelArtifact& model = models[k];
    if (model.features != all.features || model.weights.size() != features * width ||
        model.bias.size() != bias_width) {
      throw MakeError("model ", k, " of ", count, " does not fit the others' features and widths");
    }
    for (size_t row = 0; row < features; ++row) {
      std::copy_n(model.weights.begin() + row * width, width,
                  all.weights.begin() + (row * count + k) * width);
    }
    std::copy_n(model.bias.begin(), bias_width, all.bias.begin() + k * bias_width);
  }
  return all;
}

}  // namespace keel
