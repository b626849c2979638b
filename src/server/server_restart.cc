#include "server/server_restart.h"

#include <glog/logging.h>
#include <stdlib.h>

#include <exception>
#include <filesystem>
#include <system_error>

#include "server/held_copy.h"

namespace keel {
namespace {

constexpr char kHeldCopyEnv[] = "KEEL_SERVER_COPY";

}  // namespace

void KeepCopyForRestart(const KVServer& server, const std::string& folder) {
  try {
    SaveHeldCopy(server.KeepCopy(folder), folder);
    setenv(kHeldCopyEnv, folder.c_str(), 1);
  } catch (const std::exception& e) {
    LOG(WARNING) << "cannot keep a copy of this server's key ranges: " << e.what();
    unsetenv(kHeldCopyEnv);
  }
}

std::optional<proto::HeldCopy> HeldCopyFromEnvironment() {
  const char* kept = getenv(kHeldCopyEnv);
  if (!kept || !*kept) return std::nullopt;
  try {
    return LoadHeldCopy(kept);
  } catch (const std::exception& e) {
    LOG(WARNING) << "the copy of its key ranges this server kept is not used: " << e.what();
  }
  return std::nullopt;
}

FolderRemover::~FolderRemover() {
  std::error_code ignored;
  std::filesystem::remove_all(folder_, ignored);
}

}  // namespace keel
