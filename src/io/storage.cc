#include "io/storage.h"

namespace keel {

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
