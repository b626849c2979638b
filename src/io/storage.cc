#include "io/storage.h"

#include <cstdint>
#include <new>

namespace keel {
namespace {

// "N bytes" for an object known to be larger than `at_least` bytes: its size
// from a listing, or "more than AT_LEAST bytes" if the listing does not say.
std::string SizeOfLargeObject(Storage& storage, const std::string& key, uint64_t at_least) {
  try {
    for (const ObjectInfo& object : storage.List(key)) {
      if (object.key == key) return std::to_string(object.size) + " bytes";
    }
  } catch (const Error&) {
  }
  return "more than " + std::to_string(at_least) + " bytes";
}

}  // namespace

void Storage::PutPieces(const std::string& key,
                        const std::function<void(const PieceSink&)>& produce) {
  std::string bytes;
  produce([&bytes](std::string_view piece) { bytes.append(piece); });
  Put(key, bytes);
}

std::string GetAtMost(Storage& storage, const std::string& key, uint64_t max_bytes,
                      const std::string& what) {
  // One byte more than allowed tells a file that is too large from one that fits.
  const uint64_t asked = max_bytes == UINT64_MAX ? max_bytes : max_bytes + 1;
  std::string bytes;
  try {
    bytes = storage.GetRange(key, 0, asked);
  } catch (const std::bad_alloc&) {
    throw MakeError(storage.UriOf(key), ": not enough memory to read ", what, " of up to ",
                    max_bytes, " bytes");
  }
  if (bytes.size() > max_bytes) {
    throw MakeError(storage.UriOf(key), ": size check failed (",
                    SizeOfLargeObject(storage, key, max_bytes), "; ", what, " is at most ",
                    max_bytes, "); not read");
  }
  return bytes;
}

bool IsStorageUri(const std::string& text) {
  return text.rfind("s3://", 0) == 0 || text.rfind("file://", 0) == 0;
}

std::unique_ptr<Storage> OpenStorage(const std::string& uri) {
  if (uri.rfind("s3://", 0) == 0) return OpenS3Storage(uri, S3Options::FromEnvironment());
  const size_t scheme = uri.find("://");
  if (scheme != std::string::npos && uri.rfind("file://", 0) != 0) {
    throw MakeError("storage '", uri, "': unknown scheme '", uri.substr(0, scheme),
                    "' (use file://, s3:// or a path)");
  }
  return OpenFileStorage(uri);
}

}  // namespace keel
