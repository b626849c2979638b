// Local files: the few operations every layer needs, with errors that name
// the path. (Storage, in src/io/, is the interface for data and checkpoints
// that may live elsewhere.)
#ifndef KEEL_BASE_FILES_H_
#define KEEL_BASE_FILES_H_

#include <string>

struct stat;

namespace keel {

// The whole file. Throws Error "cannot read PATH: REASON".
std::string ReadFile(const std::string& path);

// Creates `folder` and its missing parents (like mkdir -p). Throws Error
// "cannot create folder F: REASON" naming the part that failed, also when a
// file that is not a folder is in the way.
void MakeDirectories(const std::string& folder);

// Writes `text` to `path` through a temporary file renamed over it, so a
// reader sees the old file or the new one, never half of it. Throws Error
// "cannot write PATH".
void WriteFileAtomically(const std::string& path, const std::string& text);

// What changes when a file's bytes may have changed, from its stat(2):
// modification time (ns), inode and device.
std::string FileVersion(const struct stat& info);

// The folder part of `path`: "a/b" for "a/b/c", "/" for "/c", "." for "c".
std::string ParentFolder(const std::string& path);

}  // namespace keel

#endif  // KEEL_BASE_FILES_H_
