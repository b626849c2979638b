#include "fuzz_util.h"

#include <glog/logging.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/checksum.h"

namespace keel::fuzz {
namespace {

std::string MakeScratchFolder() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/keel-fuzz-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror(("keel fuzz: mkdtemp " + pattern).c_str());
    std::abort();
  }
  return pattern;
}

void RemoveScratchFolder();

// Never destroyed: RemoveScratchFolder runs at exit, after static destructors.
const std::string& Folder() {
  static const std::string* folder = [] {
    auto* made = new std::string(MakeScratchFolder());
    std::atexit(RemoveScratchFolder);
    return made;
  }();
  return *folder;
}

void RemoveScratchFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(Folder(), ignored);
}

}  // namespace

void QuietLogging() {
  FLAGS_minloglevel = google::GLOG_FATAL;
  FLAGS_logtostderr = true;
}

const std::string& ScratchFolder() { return Folder(); }

void WriteScratchFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "keel fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

std::string WithValidChecksum(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (size < sizeof(uint64_t)) return bytes;
  const size_t body = size - sizeof(uint64_t);
  const uint64_t sum = Checksum64::Of(bytes.data(), body);
  std::memcpy(bytes.data() + body, &sum, sizeof(sum));
  return bytes;
}

}  // namespace keel::fuzz
