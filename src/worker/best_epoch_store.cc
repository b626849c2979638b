#include "worker/best_epoch_store.h"

#include <glog/logging.h>

#include <filesystem>
#include <memory>
#include <regex>
#include <set>
#include <system_error>

#include "base/error.h"
#include "io/checkpoint.h"
#include "io/storage.h"

namespace keel {
namespace {

constexpr char kPrefix[] = "best-model-epoch-";

std::string Within(const std::string& uri, const std::string& folder) {
  return (!uri.empty() && uri.back() == '/' ? uri : uri + "/") + folder;
}

// The folder the newest committed checkpoint of `uri` names ("" if none).
std::string FolderOfLatest(const std::string& uri) {
  CheckpointStore store(uri);
  const std::string latest = store.Latest();
  if (latest.empty()) return "";
  return store.ReadManifest(latest).trainer().best_model_folder();
}

}  // namespace

std::string BestModelFolder(int epoch) { return kPrefix + std::to_string(epoch); }

bool IsBestModelFolder(const std::string& name) {
  static const std::regex pattern("best-model-epoch-[1-9][0-9]{0,8}");
  return std::regex_match(name, pattern);
}

std::string KeepBestModel(const std::string& uri, int epoch, const ModelArtifact& model) {
  const std::string folder = BestModelFolder(epoch);
  model.Write(Within(uri, folder));
  const std::set<std::string> keep = {folder, FolderOfLatest(uri)};
  const std::unique_ptr<Storage> storage = OpenStorage(uri);
  std::set<std::string> deleted;
  for (const ObjectInfo& object : storage->List(kPrefix)) {
    const std::string name = object.key.substr(0, object.key.find('/'));
    if (!IsBestModelFolder(name) || keep.count(name)) continue;
    storage->Delete(object.key);
    deleted.insert(name);
  }
  // A folder store keeps a folder its files left: removed too (if empty).
  if (uri.rfind("s3://", 0) != 0) {
    const std::string root = uri.rfind("file://", 0) == 0 ? uri.substr(7) : uri;
    for (const std::string& name : deleted) {
      std::error_code ignored;
      std::filesystem::remove(std::filesystem::path(root) / name, ignored);
    }
  }
  return folder;
}

ModelArtifact ReadBestModel(const std::string& uri, const std::string& folder) {
  if (!IsBestModelFolder(folder)) {
    throw MakeError("the checkpoint names '", folder, "' as its best epoch's model folder, not a ",
                    "folder of the form ", kPrefix, "N");
  }
  return ModelArtifact::Read(Within(uri, folder));
}

}  // namespace keel
