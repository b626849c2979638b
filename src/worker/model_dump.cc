#include "worker/model_dump.h"

#include <algorithm>
#include <utility>
#include <vector>

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

}  // namespace keel
