#include "launch/gzip_channel.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "base/files.h"
#include "io/input_split.h"

namespace keel {
namespace {

// gzip's magic number, the first two bytes of every member.
constexpr unsigned char kGzipMagic[] = {0x1f, 0x8b};

bool StartsAsGzip(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(fopen(path.c_str(), "rb"), fclose);
  unsigned char head[2] = {0, 0};
  return file && fread(head, 1, 2, file.get()) == 2 && head[0] == kGzipMagic[0] &&
         head[1] == kGzipMagic[1];
}

// `name` without a ".gz" ending.
std::string Unpacked(const std::string& name) {
  const std::string suffix = ".gz";
  if (name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return name.substr(0, name.size() - suffix.size());
  }
  return name;
}

uint64_t UnpackFile(const std::string& from, const std::string& to) {
  if (!StartsAsGzip(from)) {
    throw MakeError(from, " is not gzip (the channel's CompressionType is Gzip)");
  }
  std::unique_ptr<gzFile_s, int (*)(gzFile)> in(gzopen(from.c_str(), "rb"), gzclose);
  if (!in) throw MakeError("cannot read ", from, ": ", strerror(errno));
  std::unique_ptr<FILE, int (*)(FILE*)> out(fopen(to.c_str(), "wb"), fclose);
  if (!out) throw MakeError("cannot write ", to, ": ", strerror(errno));
  std::vector<char> buffer(1 << 20);
  uint64_t total = 0;
  while (true) {
    const int n = gzread(in.get(), buffer.data(), static_cast<unsigned>(buffer.size()));
    if (n < 0) {
      int code = 0;
      const char* message = gzerror(in.get(), &code);
      throw MakeError(from, ": not a whole gzip stream (", message, ")");
    }
    if (n == 0) break;
    if (fwrite(buffer.data(), 1, static_cast<size_t>(n), out.get()) != static_cast<size_t>(n)) {
      throw MakeError("cannot write ", to, ": ", strerror(errno));
    }
    total += static_cast<uint64_t>(n);
  }
  if (fflush(out.get()) != 0) throw MakeError("cannot write ", to, ": ", strerror(errno));
  return total;
}

}  // namespace

uint64_t UnpackGzipFolder(const std::string& folder, const std::string& into) {
  MakeDirectories(into);
  uint64_t total = 0;
  for (const InputFile& file : ListInputs(folder)) {
    const std::string name = file.path.substr(file.path.rfind('/') + 1);
    total += UnpackFile(file.path, into + "/" + Unpacked(name));
  }
  return total;
}

}  // namespace keel
