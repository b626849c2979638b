// `keel checkpoint ls|show|verify URI`.
#include <iomanip>
#include <iostream>

#include "base/error.h"
#include "cli/commands.h"
#include "io/checkpoint.h"

namespace keel {

int RunCheckpointCommand(const std::string& what, const std::string& uri) {
  if (uri.empty()) throw MakeError("say where: keel checkpoint ", what, " URI");
  if (what == "ls") {
    CheckpointStore store(uri);
    const std::string latest = store.Latest();
    const std::vector<std::string> committed = store.Committed();
    for (const std::string& id : committed) {
      const proto::CheckpointManifest manifest = store.ReadManifest(id);
      uint64_t bytes = 0, rows = 0;
      for (const auto& file : manifest.files()) bytes += file.bytes(), rows += file.rows();
      std::cout << id << "  epoch " << manifest.epoch() << " minibatch " << manifest.batch() << "  "
                << manifest.num_servers() << " server(s) " << manifest.num_workers()
                << " worker(s)  " << rows << " rows " << bytes << " bytes  " << manifest.created()
                << (manifest.delta_of().empty()
                        ? "  full"
                        : "  delta " + std::to_string(manifest.delta_depth()) + " of " +
                              manifest.delta_of())
                << (manifest.final() ? "  final" : "") << (id == latest ? "  LATEST" : "") << "\n";
    }
    for (const std::string& id : store.Incomplete()) {
      std::cout << id << "  incomplete (no manifest: not a checkpoint)\n";
    }
    if (committed.empty()) std::cout << "no checkpoints in " << uri << "\n";
    return 0;
  }
  if (what == "show" || what == "verify") {
    auto [root, spec] = SplitResumeSpec(uri, "");
    CheckpointStore store(root);
    const std::string id = store.Resolve(spec);
    if (what == "show") {
      const proto::CheckpointManifest manifest = store.ReadManifest(id);
      std::cout << ManifestToJson(manifest) << "\n";
      if (!manifest.delta_of().empty()) {
        // The checkpoints its state is made of, as resume replays them.
        std::cout << "chain:";
        for (const proto::CheckpointManifest& link : store.Chain(id)) {
          std::cout << " " << link.id() << (link.delta_of().empty() ? " (full)" : "");
        }
        std::cout << "\n";
      }
      return 0;
    }
    const std::vector<proto::CheckpointManifest> chain = store.Chain(id);
    const proto::CheckpointManifest manifest = store.Verify(id);
    int files = 0;
    for (const proto::CheckpointManifest& link : chain) files += link.files_size();
    std::cout << id << ": manifest and " << manifest.files_size()
              << " file(s) verified (sizes and checksums)";
    if (chain.size() > 1) {
      std::cout << ", with its chain: " << chain.size() << " checkpoints from the full "
                << chain.front().id() << ", " << files << " file(s)";
    }
    std::cout << "\n";
    return 0;
  }
  throw MakeError("unknown checkpoint command '", what, "' (ls, show or verify)");
}

}  // namespace keel
