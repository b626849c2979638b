// DumpModel: the servers' current weights, read back as a model artifact.
#ifndef KEEL_WORKER_MODEL_DUMP_H_
#define KEEL_WORKER_MODEL_DUMP_H_

#include <string>
#include <vector>

#include "kv/kv_worker.h"
#include "worker/hyperparameters.h"
#include "worker/model_artifact.h"

namespace keel {

// Every row of the servers' weight table (`weight_width` floats per feature,
// sorted by feature index) and the bias (`bias_width` floats; zeros without
// --use_bias), with the job's hyperparameters and their JSON. Blocks; throws
// Error if a request fails.
ModelArtifact DumpModel(KVWorker* client, const Hyperparameters& hyperparameters,
                        const std::string& hyperparameter_json, int weight_width, int bias_width);

// A dump's rows (`keys` as the servers hold them, mixed, and `width` weights
// a key) in artifact order: `keys` become the feature indices, sorted, and
// the weights follow. In place: beyond the rows it holds 4 bytes a row (8
// from 2^32 rows). Throws Error if the weights do not fit the keys.
void SortDumpedRowsByFeature(std::vector<Key>* keys, std::vector<float>* weights, int width);

// Model k of `all`, a dump of a job of num_models models (every model's
// columns side by side, all.hyperparameters the job's): its columns of the
// weights and the bias, its own hyperparameters (Hyperparameters::Model(k)),
// and which of how many models it is. Throws Error if k is not a model of
// the job or `all` does not hold every model's columns.
ModelArtifact SliceModel(const ModelArtifact& all, int k);

// The inverse of SliceModel: `models` (every model of a job of
// `job.num_models`, in order, over the same features) side by side again, as
// one artifact of every model's columns with `job` as its hyperparameters.
// For scoring every model in one pass. Throws Error if the models do not fit
// the job or list other features.
ModelArtifact JoinModels(const std::vector<ModelArtifact>& models, const Hyperparameters& job);

}  // namespace keel

#endif  // KEEL_WORKER_MODEL_DUMP_H_
