// Storage: objects under one root, behind a URI. Two backends hide everything
// else: `file:///path` (a folder; the embedded default) and
// `s3://bucket/prefix` (any S3-compatible store, signed with AWS Signature V4).
//
// Keys are relative to the root and use '/' as separator ("ckpt-12/server-0.bin").
// Implementations are safe for concurrent use without external synchronization.
// Every failure throws keel::Error naming the object's URI (never a credential);
// a missing object throws NotFoundError.
#ifndef KEEL_IO_STORAGE_H_
#define KEEL_IO_STORAGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kv/error.h"

namespace keel {

class NotFoundError : public Error {
 public:
  using Error::Error;
};

struct ObjectInfo {
  std::string key;  // relative to the root
  uint64_t size = 0;
};

class Storage {
 public:
  virtual ~Storage() = default;

  // Writes `data` as object `key`, replacing any previous one. A reader sees
  // the old object or the new one, never a part of it.
  virtual void Put(const std::string& key, std::string_view data) = 0;

  // The whole object.
  virtual std::string Get(const std::string& key) = 0;

  // `length` bytes from `offset` (fewer at the end of the object).
  virtual std::string GetRange(const std::string& key, uint64_t offset, uint64_t length) = 0;

  // Every object whose key starts with `prefix`, sorted by key.
  virtual std::vector<ObjectInfo> List(const std::string& prefix) = 0;

  // Removes the object; removing a missing object is not an error.
  virtual void Delete(const std::string& key) = 0;

  // The object's URI, for messages ("s3://bucket/prefix/key", "file:///path/key").
  virtual std::string UriOf(const std::string& key) const = 0;
};

// Opens the storage a URI names: file:///absolute/path, s3://bucket[/prefix],
// or a plain path (a folder). Throws Error for an unknown scheme or a bad URI.
std::unique_ptr<Storage> OpenStorage(const std::string& uri);

}  // namespace keel

#endif  // KEEL_IO_STORAGE_H_
