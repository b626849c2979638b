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
      std::cout << ManifestToJson(store.ReadManifest(id)) << "\n";
      return 0;
    }
    const proto::CheckpointManifest manifest = store.Verify(id);
    std::cout << id << ": manifest and " << manifest.files_size()
              << " file(s) verified (sizes and checksums)\n";
    return 0;
  }
  throw MakeError("unknown checkpoint command '", what, "' (ls, show or verify)");
}

}  // namespace keel
