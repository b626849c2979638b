// What a server that starts over (launch/start_over.h) hands its next process:
// the copy of the key ranges it held (server/held_copy.h), in a folder named
// by the environment variable KEEL_SERVER_COPY, removed when the process
// that reads it ends.
//
// Free functions, and a scope guard; not thread-safe (the role's main thread).
#ifndef KEEL_SERVER_SERVER_RESTART_H_
#define KEEL_SERVER_SERVER_RESTART_H_

#include <optional>
#include <string>

#include "keel.pb.h"
#include "server/kv_server.h"

namespace keel {

// Writes the copy of `server`'s ranges into `folder` (the node stopped) and
// names it in KEEL_SERVER_COPY for the process that replaces this one; a copy
// that cannot be written is logged and the server starts over without one.
void KeepCopyForRestart(const KVServer& server, const std::string& folder);

// The copy an earlier process of this server kept (KEEL_SERVER_COPY), if
// any; one that cannot be read is logged and not used.
std::optional<proto::HeldCopy> HeldCopyFromEnvironment();

// Removes a folder when it goes out of scope (not when the process is
// replaced by exec: the next process uses the folder).
class FolderRemover {
 public:
  explicit FolderRemover(std::string folder) : folder_(std::move(folder)) {}
  ~FolderRemover();
  FolderRemover(const FolderRemover&) = delete;
  FolderRemover& operator=(const FolderRemover&) = delete;

 private:
  const std::string folder_;
};

}  // namespace keel

#endif  // KEEL_SERVER_SERVER_RESTART_H_
