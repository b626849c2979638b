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
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace keel {

class NotFoundError : public Error {
 public:
  using Error::Error;
};

struct ObjectInfo {
  std::string key;  // relative to the root
  uint64_t size = 0;
  // Changes whenever the object's bytes may have changed (S3: its ETag and
  // LastModified; a file: its modification time and inode). Caches of what
  // was read from an object compare it.
  std::string version = {};
};

class Storage {
 public:
  virtual ~Storage() = default;

  // Writes `data` as object `key`, replacing any previous one. A reader sees
  // the old object or the new one, never a part of it.
  virtual void Put(const std::string& key, std::string_view data) = 0;

  // Receives an object's bytes piece by piece, in order.
  using PieceSink = std::function<void(std::string_view piece)>;
  // Writes object `key` from the pieces `produce` hands its sink, in order,
  // with Put's guarantee (the old object or the new one, never a part). A
  // folder writes each piece as it comes and S3 sends each part as it fills
  // (S3Options::part_size), so the object is never whole in memory; this
  // default gathers the pieces and Puts them. An exception from `produce`
  // leaves the old object; the sink's own exceptions (a failed write) must
  // reach PutPieces.
  virtual void PutPieces(const std::string& key,
                         const std::function<void(const PieceSink&)>& produce);

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
// or a plain path (a folder). s3:// takes its settings from the environment
// (S3Options::FromEnvironment). Throws Error for an unknown scheme or a bad URI.
std::unique_ptr<Storage> OpenStorage(const std::string& uri);

// The whole object `key` if it holds at most `max_bytes` bytes (what a file
// of its kind can be: `what`, e.g. "a checkpoint manifest"). A larger object
// is refused without being read whole: Error "URI: size check failed (N
// bytes; WHAT is at most MAX); not read". Memory never goes beyond the object's real
// size, and a shortage of it is an Error naming the object, not an abort.
// A missing object throws NotFoundError, as Get does.
std::string GetAtMost(Storage& storage, const std::string& key, uint64_t max_bytes,
                      const std::string& what);

// True for "s3://..." and "file://..." URIs; false for plain paths.
bool IsStorageUri(const std::string& text);

// A folder: Put writes a temporary file beside the target, fsyncs it and
// renames it over the target (creating parent folders), so readers see the old
// or the new object. List walks the folder recursively. `root` is a path or a
// file:// URI; it need not exist yet.
std::unique_ptr<Storage> OpenFileStorage(const std::string& root);

// Settings of the S3 backend.
struct S3Options {
  enum class Addressing { kAuto, kPath, kVirtualHost };

  // Credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN).
  // Without a key id and secret, requests go unsigned. They are never logged
  // nor put in an error message.
  std::string access_key_id, secret_access_key, session_token;
  // AWS_REGION (or AWS_DEFAULT_REGION); signs requests for this region.
  std::string region = "us-east-1";
  // AWS_ENDPOINT_URL or KEEL_S3_ENDPOINT: an S3-compatible store,
  // "http://127.0.0.1:9000". Empty: AWS, https://s3.REGION.amazonaws.com.
  std::string endpoint;
  // KEEL_S3_ADDRESSING=path|virtual. kAuto: path-style (endpoint/bucket/key)
  // with an endpoint, virtual-host (bucket.endpoint/key) for AWS.
  Addressing addressing = Addressing::kAuto;
  // Objects larger than this go up in parts of part_size bytes
  // (KEEL_S3_MULTIPART_THRESHOLD, KEEL_S3_PART_SIZE), the last one shorter;
  // a failed part aborts the upload. A writer holds at most the larger of the
  // two of an object (PutPieces). part_size must be from 5 MiB to 5 GiB
  // (S3's limits); at most 10,000 parts, so 8 MiB parts cap an object at
  // 78 GiB.
  uint64_t multipart_threshold = uint64_t{8} << 20;
  uint64_t part_size = uint64_t{8} << 20;
  // A request that fails to connect or gets a 5xx (or 429) is tried again up
  // to max_retries times (KEEL_S3_RETRIES), after initial_backoff_s, doubling
  // each time up to max_backoff_s.
  int max_retries = 5;
  double initial_backoff_s = 0.2;
  double max_backoff_s = 10;
  // Connection timeout, and the time a transfer may go on below 1 KiB/s
  // before it counts as failed.
  double connect_timeout_s = 10;
  double stall_timeout_s = 60;
  // Keys per ListObjectsV2 page (S3 returns at most 1000).
  int list_page_size = 1000;

  // The defaults, overridden by the variables named above. Throws Error
  // naming a variable with a bad value.
  static S3Options FromEnvironment();
};

// `uri` is s3://bucket[/prefix]. Throws Error for a bad URI or options.
std::unique_ptr<Storage> OpenS3Storage(const std::string& uri, const S3Options& options);

}  // namespace keel

#endif  // KEEL_IO_STORAGE_H_
