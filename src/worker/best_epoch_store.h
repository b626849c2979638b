// The best validation epoch's model, kept in the checkpoint store so that a
// resumed job ends with it, not only with the best of the epochs after the
// resume.
//
// The leading worker writes the model of each new best epoch to
// <store>/best-model-epoch-N/ (ModelArtifact::Write) before the checkpoint
// that follows names it (TrainerState.best_epoch and best_model_folder), and
// deletes the folders of earlier best epochs except the one the newest
// committed checkpoint names: a resume from that checkpoint, or from the next,
// finds its folder. (A resume from an older checkpoint, --resume=ID, may not:
// it then keeps the best epoch after the resume, and says so.) A resume reads
// the folder its checkpoint's state names.
//
// Free functions on a store URI; they keep no state.
#ifndef KEEL_WORKER_BEST_EPOCH_STORE_H_
#define KEEL_WORKER_BEST_EPOCH_STORE_H_

#include <string>

#include "worker/model_artifact.h"

namespace keel {

// "best-model-epoch-N".
std::string BestModelFolder(int epoch);
// Whether `name` is a folder BestModelFolder makes (a name read from a
// checkpoint is checked with it before it names anything to read).
bool IsBestModelFolder(const std::string& name);

// Writes `model` as epoch `epoch`'s into the checkpoint store `uri`, then
// deletes the other best epochs' folders but the one the newest committed
// checkpoint names. Returns the folder's name. Throws Error.
std::string KeepBestModel(const std::string& uri, int epoch, const ModelArtifact& model);

// The model in `folder` of the checkpoint store `uri`. Throws Error, naming
// the folder, for a name IsBestModelFolder refuses or a model that cannot be
// read.
ModelArtifact ReadBestModel(const std::string& uri, const std::string& folder);

}  // namespace keel

#endif  // KEEL_WORKER_BEST_EPOCH_STORE_H_
