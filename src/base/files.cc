#include "base/files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace keel {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw MakeError("cannot read ", path, ": ", std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw MakeError("cannot read ", path, ": ", std::strerror(errno));
  return text.str();
}

std::string FileVersion(const struct stat& info) {
  return std::to_string(static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 +
                        info.st_mtim.tv_nsec) +
         ":" + std::to_string(info.st_ino) + ":" + std::to_string(info.st_dev);
}

void WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    out << text;
    if (!out) throw MakeError("cannot write ", temporary);
  }
  if (rename(temporary.c_str(), path.c_str()) != 0) throw MakeError("cannot write ", path);
}

std::string ParentFolder(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

void MakeDirectories(const std::string& folder) {
  if (folder.empty()) return;
  struct stat info;
  if (stat(folder.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) return;
    throw MakeError("cannot create folder ", folder, ": a file is in the way");
  }
  if (folder != "/" && folder != ".") MakeDirectories(ParentFolder(folder));
  if (mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST) {
    throw MakeError("cannot create folder ", folder, ": ", std::strerror(errno));
  }
}

}  // namespace keel
