#include "worker/model_dump.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "base/error.h"

namespace keel {
namespace {

// The dumped rows in artifact order: sorted by feature index, not by mixed key.
void AddRowsByFeature(const std::vector<Key>& keys, const std::vector<float>& weights, int width,
                      ModelArtifact* artifact) {
  std::vector<std::pair<uint64_t, size_t>> order(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) order[i] = {UnmixKey(keys[i]), i};
  std::sort(order.begin(), order.end());
  artifact->features.reserve(order.size());
  artifact->weights.reserve(weights.size());
  for (const auto& [feature, index] : order) {
    artifact->features.push_back(feature);
    artifact->weights.insert(artifact->weights.end(), weights.begin() + index * width,
                             weights.begin() + (index + 1) * width);
  }
}

}  // namespace

ModelArtifact DumpModel(KVWorker* client, const Hyperparameters& hyperparameters,
                        const std::string& hyperparameter_json, int weight_width, int bias_width) {
  ModelArtifact artifact;
  artifact.hyperparameters = hyperparameters;
  artifact.hyperparameter_json = hyperparameter_json;
  std::vector<Key> keys;
  std::vector<float> weights;
  client->Dump(kWeightTable, weight_width, &keys, &weights);
  AddRowsByFeature(keys, weights, weight_width, &artifact);
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
  ModelArtifact model = all;
  model.hyperparameters = h.Model(k);  // throws for a k outside the job's models
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
