// BatchCache: a worker's prepared minibatches of its training share, kept in
// a local file after the first pass over the text, so that later passes read
// them instead of parsing and preparing keys again (as Vowpal Wabbit's cache
// does).
//
// A cache file holds the minibatches exactly as BatchStream delivers them:
// the CSR batch scaled by the job's data statistics (DataScaler), and its
// prepared keys, so a later pass neither scales nor prepares them again
// (unless scaling would add many entries to every row: see BatchStream). It
// is valid for one key (BatchCacheKey): the splits (paths, byte ranges, the
// files' sizes and versions), the reader's options and the minibatch size;
// any change makes another key, and the file is written again. Its header
// also holds the scaling's fingerprint (0: batches as read): a stream that
// scales otherwise (other statistics) writes the file again too. Files are written under a
// temporary name held with an exclusive lock and renamed into place once
// complete; a temporary file whose writer is gone (a crash) is removed the
// next time a cache opens in that folder.
//
// The file is untrusted input: every count and offset is checked against the
// file's size and the batch's own arrays before use, and the first reader in
// a process decodes every batch with all its checks and its checksum (unless
// this process wrote that very file). A damaged or hostile file is removed
// with a warning naming it and the stream parses the text instead. A file cut
// short while a reader has it mapped is an Error naming it, never SIGBUS.
#ifndef KEEL_WORKER_BATCH_CACHE_H_
#define KEEL_WORKER_BATCH_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/input_split.h"
#include "io/readers.h"

namespace keel {

struct PreparedBatch;  // worker/prepared_batch.h

// What a cache file of `splits` read with `reader` in minibatches of
// `batch_size` rows is valid for. A stream (pipe) is read once: its key is
// valid in this process only.
uint64_t BatchCacheKey(const std::vector<InputSplit>& splits, const ReaderOptions& reader,
                       size_t batch_size);

// Reads a sealed cache file, mapped into memory. Not thread-safe.
class BatchCacheReader {
 public:
  ~BatchCacheReader();
  BatchCacheReader(const BatchCacheReader&) = delete;
  BatchCacheReader& operator=(const BatchCacheReader&) = delete;

  // The next minibatch; false after the last. Throws Error naming the file
  // and the minibatch if the file is damaged (it changed after it was
  // opened), also if another process truncated it: the mapping's reads turn
  // that fault into the error (base/mapped_read.h).
  bool Next(PreparedBatch* out);

  // The fingerprint of the scaling the batches were given (0: none).
  uint64_t scaling() const { return scaling_; }
  // What the pass that wrote the file counted.
  uint64_t rows() const { return rows_; }
  uint64_t skipped_records() const { return skipped_; }
  uint64_t bytes_read() const { return bytes_read_; }
  const std::string& path() const { return path_; }

 private:
  friend class BatchCache;
  BatchCacheReader(std::string path, const char* data, size_t size);
  // Checks the header and the footer and (when `verify`) decodes every batch
  // and checks its checksum. Throws OtherKey if the file is for another key,
  // Error "PATH: WHAT" if it is damaged.
  class OtherKey : public Error {
   public:
    using Error::Error;
  };
  void Check(uint64_t key, bool verify);
  // Copy `bytes` bytes at byte `at` of the file to `to`; Checksum returns
  // their checksum. Both throw Error if the file was truncated (by another
  // process) so that it no longer holds them: a read of the mapping past the
  // file's end, which would raise SIGBUS (base/mapped_read.h).
  void Copy(size_t at, void* to, size_t bytes) const;
  uint64_t Checksum(size_t at, size_t bytes) const;
  // Resizes `out` to `count` elements copied from byte `at`; returns the
  // offset after them.
  template <typename T>
  size_t CopyArray(size_t at, uint64_t count, std::vector<T>* out) const;
  // Decodes the batch at byte `at` into `out` with the checks that keep the
  // compute in bounds, and (`full`) those that keep its keys right; returns
  // the offset after it. Throws Error naming what is wrong.
  size_t DecodeBatch(size_t at, bool full, PreparedBatch* out) const;

  std::string path_;
  const char* data_;
  size_t size_;
  size_t offset_ = 0;  // of the next batch
  size_t end_ = 0;     // of the footer
  uint64_t batches_ = 0, read_ = 0;
  uint64_t rows_ = 0, skipped_ = 0, bytes_read_ = 0;
  uint64_t scaling_ = 0;
};

// Writes a cache file under a temporary name; Seal renames it into place.
// Dropped before Seal (the pass stopped, failed, or passed the size bound),
// the temporary file is removed. Not thread-safe.
class BatchCacheWriter {
 public:
  ~BatchCacheWriter();
  BatchCacheWriter(const BatchCacheWriter&) = delete;
  BatchCacheWriter& operator=(const BatchCacheWriter&) = delete;

  // Appends one minibatch (as delivered). False, with a warning, once the file
  // would pass the cache's size bound or cannot be written: the writer has
  // then given up and its file is gone.
  bool Append(const PreparedBatch& batch);
  // Completes the file; `skipped_records` and `bytes_read` are the pass's.
  // False, with a warning, if it cannot be completed.
  bool Seal(uint64_t skipped_records, uint64_t bytes_read);

 private:
  friend class BatchCache;
  // Once sealed, the file's identity goes to `*written` (the cache's own
  // record of the file it verified), which must outlive the writer.
  BatchCacheWriter(std::string path, std::string temporary, int descriptor, uint64_t key,
                   uint64_t scaling, uint64_t max_bytes, std::string* written);
  // Buffers `size` bytes, writing the buffer out when full; false once given up.
  bool Write(const void* data, size_t size);
  // Writes `bytes` to the file; false (given up) if it cannot.
  bool WriteOut(const std::vector<char>& bytes);
  void GiveUp(const std::string& why);

  std::string path_, temporary_;
  int descriptor_;
  uint64_t max_bytes_;
  std::string* written_identity_;
  uint64_t written_ = 0;
  uint64_t batches_ = 0, rows_ = 0;
  std::vector<char> buffer_;
};

// One cache file, `name` in `folder`. Not thread-safe: one stream at a time.
class BatchCache {
 public:
  // `max_bytes` bounds the file. Creates `folder` if needed and removes the
  // temporary files of writers that are gone. Throws Error if the folder
  // cannot be created.
  BatchCache(std::string folder, std::string name, uint64_t max_bytes);

  // The sealed file for `key`, checked; null if there is none, it is for
  // another key, or it is damaged (then removed, with a warning).
  std::unique_ptr<BatchCacheReader> OpenReader(uint64_t key);
  // Removes the file (one of batches scaled otherwise than a stream wants).
  void Discard();
  // A new file for `key`, of batches given the scaling whose fingerprint is
  // `scaling` (0: none); null, with a warning, if it cannot be created.
  std::unique_ptr<BatchCacheWriter> OpenWriter(uint64_t key, uint64_t scaling = 0);

  const std::string& path() const { return path_; }

 private:
  std::string folder_;
  std::string path_;
  uint64_t max_bytes_;
  // The identity (mtime, inode, size) of the file this process verified or wrote.
  std::string verified_;
};

// A folder for caches that lives as long as this object: under the system's
// temporary folder ($TMPDIR, else /tmp), locked while in use, removed by the
// destructor. Creating one also removes such folders whose owner is gone (a
// crashed process). Throws Error if it cannot be created.
class TemporaryCacheFolder {
 public:
  TemporaryCacheFolder();
  ~TemporaryCacheFolder();
  TemporaryCacheFolder(const TemporaryCacheFolder&) = delete;
  TemporaryCacheFolder& operator=(const TemporaryCacheFolder&) = delete;

  const std::string& path() const { return path_; }

  // Removes the folders under the system's temporary folder whose owner is
  // gone, as the constructor does; for a process that makes none.
  static void RemoveAbandoned();

 private:
  std::string path_;
  int lock_ = -1;
};

}  // namespace keel

#endif  // KEEL_WORKER_BATCH_CACHE_H_
