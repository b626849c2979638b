#include "worker/batch_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <system_error>

#include "base/checksum.h"
#include "base/error.h"
#include "base/files.h"
#include "worker/batch_stream.h"

namespace keel {
namespace {

// File: header, batches, footer. Each batch: a BatchHeader, then its arrays
// in the order of PreparedBatch (labels, row offsets, indices, values, keys,
// positions, key offsets, non-zeros by key). Numbers are in the machine's
// byte order; the header's byte-order mark rejects a file from another.
constexpr char kMagic[8] = {'K', 'E', 'E', 'L', 'B', 'C', 'H', '1'};
constexpr char kEndMagic[8] = {'K', 'E', 'E', 'L', 'B', 'E', 'N', 'D'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kByteOrder = 0x01020304;
constexpr char kTemporarySuffix[] = ".partial";
constexpr char kFolderPrefix[] = "keel-cache-";
constexpr char kLockName[] = ".lock";
// Bounds on a batch's claims, far above any minibatch a job makes.
constexpr uint32_t kMaxLabelWidth = 1 << 16;

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t byte_order;
  uint64_t key;
};

struct BatchHeader {
  uint64_t rows;
  uint64_t nnz;
  uint64_t keys;
  uint32_t label_width;
  uint32_t reserved;
  uint64_t checksum;  // WordChecksum64 of the arrays that follow
};

struct Footer {
  uint64_t batches;
  uint64_t rows;
  uint64_t skipped_records;
  uint64_t bytes_read;
  uint64_t checksum;  // WordChecksum64 of the fields above
  char magic[8];
};

uint64_t FooterChecksum(const Footer& footer) {
  return WordChecksum64(&footer, offsetof(Footer, checksum));
}

// The bytes of a batch's arrays, or 0 if the counts overflow.
uint64_t PayloadBytes(const BatchHeader& header) {
  const unsigned __int128 bytes =
      static_cast<unsigned __int128>(header.rows) * header.label_width * sizeof(float) +
      (static_cast<unsigned __int128>(header.rows) + 1) * sizeof(uint64_t) +
      static_cast<unsigned __int128>(header.nnz) *
          (sizeof(uint64_t) + sizeof(float) + 2 * sizeof(uint32_t)) +
      static_cast<unsigned __int128>(header.keys) * sizeof(Key) +
      (static_cast<unsigned __int128>(header.keys) + 1) * sizeof(uint32_t);
  return bytes > UINT64_MAX ? 0 : static_cast<uint64_t>(bytes);
}

std::string ErrnoText(int error) { return std::strerror(error); }

// Takes an exclusive lock on `descriptor` without waiting; false if another
// process holds it.
bool TryLock(int descriptor) { return flock(descriptor, LOCK_EX | LOCK_NB) == 0; }

// Removes the temporary files in `folder` whose writer is gone: the writer
// holds its file locked while it lives.
void RemoveAbandonedFiles(const std::string& folder) {
  DIR* listing = opendir(folder.c_str());
  if (listing == nullptr) return;
  const std::string suffix = kTemporarySuffix;
  for (struct dirent* entry = readdir(listing); entry != nullptr; entry = readdir(listing)) {
    const std::string name = entry->d_name;
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string path = folder + "/" + name;
    const int descriptor = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) continue;
    if (TryLock(descriptor)) {
      LOG(WARNING) << "removed " << path << ", a cache file its writer left unfinished";
      unlink(path.c_str());
    }
    close(descriptor);
  }
  closedir(listing);
}

// Distinguishes this process from an earlier one with the same PID.
uint64_t ProcessNonce() {
  static const uint64_t nonce = std::random_device()() * 0x100000000ULL + std::random_device()();
  return nonce;
}

template <typename T>
void CopyArray(const char* data, uint64_t count, std::vector<T>* out) {
  out->resize(count);
  if (count > 0) std::memcpy(out->data(), data, count * sizeof(T));
}

}  // namespace

uint64_t BatchCacheKey(const std::vector<InputSplit>& splits, const ReaderOptions& reader,
                       size_t batch_size) {
  std::string text = "batch cache 1\n";
  const auto add = [&](const auto&... fields) {
    ((text += std::to_string(fields), text += ' '), ...);
    text += '\n';
  };
  add(static_cast<int>(reader.format), reader.zero_based, reader.skip_bad_records,
      reader.feature_dim, static_cast<int>(reader.labels), reader.num_classes, batch_size);
  for (const InputSplit& split : splits) {
    text += split.path + "\n" + split.version + "\n";
    add(split.begin, split.end, split.is_pipe, split.file_size);
    // A stream's bytes are known only to the process that read them.
    if (split.is_pipe) add(getpid(), ProcessNonce());
  }
  return Checksum64::Of(text.data(), text.size());
}

BatchCacheReader::BatchCacheReader(std::string path, const char* data, size_t size)
    : path_(std::move(path)), data_(data), size_(size) {}

BatchCacheReader::~BatchCacheReader() {
  munmap(const_cast<char*>(data_), size_);
}

void BatchCacheReader::Check(uint64_t key, bool verify) {
  FileHeader header;
  Footer footer;
  if (size_ < sizeof(header) + sizeof(footer)) {
    throw MakeError(path_, ": ", size_, " bytes, too short for a batch cache");
  }
  std::memcpy(&header, data_, sizeof(header));
  std::memcpy(&footer, data_ + size_ - sizeof(footer), sizeof(footer));
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0 || header.version != kVersion ||
      header.byte_order != kByteOrder) {
    throw MakeError(path_, ": not a batch cache of this version and byte order");
  }
  if (header.key != key) throw MakeError(path_, ": a cache of other input (its key differs)");
  if (std::memcmp(footer.magic, kEndMagic, sizeof(kEndMagic)) != 0 ||
      footer.checksum != FooterChecksum(footer)) {
    throw MakeError(path_, ": the footer is damaged or missing");
  }
  offset_ = sizeof(header);
  end_ = size_ - sizeof(footer);
  batches_ = footer.batches;
  rows_ = footer.rows;
  skipped_ = footer.skipped_records;
  bytes_read_ = footer.bytes_read;
  // Walk the batches: their sizes must add up to the file's.
  size_t at = offset_;
  uint64_t rows = 0;
  for (uint64_t batch = 0; batch < batches_; ++batch) {
    BatchHeader head;
    if (end_ - at < sizeof(head)) throw MakeError(path_, ": batch ", batch, " is cut off");
    std::memcpy(&head, data_ + at, sizeof(head));
    const uint64_t payload = PayloadBytes(head);
    if (payload == 0 || head.label_width == 0 || head.label_width > kMaxLabelWidth ||
        payload > end_ - at - sizeof(head)) {
      throw MakeError(path_, ": batch ", batch, " at byte ", at, " claims more than the file holds");
    }
    if (verify && WordChecksum64(data_ + at + sizeof(head), payload) != head.checksum) {
      throw MakeError(path_, ": batch ", batch, " at byte ", at, " fails its checksum");
    }
    rows += head.rows;
    at += sizeof(head) + payload;
  }
  if (at != end_ || rows != rows_) {
    throw MakeError(path_, ": the batches do not add up to the footer's count");
  }
}

bool BatchCacheReader::Next(PreparedBatch* out) {
  if (read_ == batches_) return false;
  const auto damaged = [&](const char* what) {
    return MakeError(path_, ": batch ", read_, " at byte ", offset_, ": ", what,
                     " (the file changed after it was opened)");
  };
  BatchHeader head;
  if (end_ - offset_ < sizeof(head)) throw damaged("cut off");
  std::memcpy(&head, data_ + offset_, sizeof(head));
  const uint64_t payload = PayloadBytes(head);
  if (payload == 0 || head.label_width == 0 || head.label_width > kMaxLabelWidth ||
      payload > end_ - offset_ - sizeof(head) || head.nnz > UINT32_MAX) {
    throw damaged("claims more than the file holds");
  }
  const char* at = data_ + offset_ + sizeof(head);
  Batch& batch = out->batch;
  batch.label_width = static_cast<int>(head.label_width);
  CopyArray(at, head.rows * head.label_width, &batch.labels);
  at += head.rows * head.label_width * sizeof(float);
  CopyArray(at, head.rows + 1, &batch.row_offsets);
  at += (head.rows + 1) * sizeof(uint64_t);
  CopyArray(at, head.nnz, &batch.indices);
  at += head.nnz * sizeof(uint64_t);
  CopyArray(at, head.nnz, &batch.values);
  at += head.nnz * sizeof(float);
  std::vector<Key> keys;
  CopyArray(at, head.keys, &keys);
  at += head.keys * sizeof(Key);
  CopyArray(at, head.nnz, &out->positions);
  at += head.nnz * sizeof(uint32_t);
  CopyArray(at, head.keys + 1, &out->key_offsets);
  at += (head.keys + 1) * sizeof(uint32_t);
  CopyArray(at, head.nnz, &out->nonzeros_by_key);
  // What the compute indexes with: every offset and position in range.
  if (batch.row_offsets.front() != 0 || batch.row_offsets.back() != head.nnz ||
      out->key_offsets.front() != 0 || out->key_offsets.back() != head.nnz) {
    throw damaged("offsets out of range");
  }
  for (size_t r = 1; r < batch.row_offsets.size(); ++r) {
    if (batch.row_offsets[r] < batch.row_offsets[r - 1]) throw damaged("row offsets go back");
  }
  for (size_t u = 1; u < out->key_offsets.size(); ++u) {
    if (out->key_offsets[u] < out->key_offsets[u - 1]) throw damaged("key offsets go back");
  }
  uint32_t bad = 0;
  for (uint32_t position : out->positions) bad |= position >= head.keys;
  for (uint32_t nonzero : out->nonzeros_by_key) bad |= nonzero >= head.nnz;
  if (bad) throw damaged("a position is out of range");
  out->keys = SharedArray<const Key>(std::move(keys));
  offset_ += sizeof(head) + payload;
  ++read_;
  return true;
}

BatchCacheWriter::BatchCacheWriter(std::string path, std::string temporary, int descriptor,
                                   uint64_t key, uint64_t max_bytes)
    : path_(std::move(path)),
      temporary_(std::move(temporary)),
      descriptor_(descriptor),
      max_bytes_(max_bytes) {
  buffer_.reserve(size_t{1} << 20);
  FileHeader header;
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kVersion;
  header.byte_order = kByteOrder;
  header.key = key;
  Write(&header, sizeof(header));
}

BatchCacheWriter::~BatchCacheWriter() {
  if (descriptor_ >= 0) {
    unlink(temporary_.c_str());
    close(descriptor_);
  }
}

bool BatchCacheWriter::Write(const void* data, size_t size) {
  if (descriptor_ < 0) return false;
  if (written_ + size > max_bytes_) {
    GiveUp("it would pass --cache_max_bytes=" + std::to_string(max_bytes_));
    return false;
  }
  written_ += size;
  const char* bytes = static_cast<const char*>(data);
  if (buffer_.size() + size <= buffer_.capacity()) {
    buffer_.insert(buffer_.end(), bytes, bytes + size);
    return true;
  }
  std::vector<char> pending;
  pending.swap(buffer_);
  pending.insert(pending.end(), bytes, bytes + size);
  buffer_.reserve(size_t{1} << 20);
  for (size_t done = 0; done < pending.size();) {
    const ssize_t wrote = write(descriptor_, pending.data() + done, pending.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      GiveUp("cannot write: " + ErrnoText(errno));
      return false;
    }
    done += static_cast<size_t>(wrote);
  }
  return true;
}

void BatchCacheWriter::GiveUp(const std::string& why) {
  LOG(WARNING) << "no batch cache at " << path_ << ": " << why
               << "; later passes parse the text again";
  unlink(temporary_.c_str());
  close(descriptor_);
  descriptor_ = -1;
}

bool BatchCacheWriter::Append(const PreparedBatch& prepared) {
  const Batch& batch = prepared.batch;
  BatchHeader head{batch.rows(),
                   batch.nnz(),
                   prepared.keys.size(),
                   static_cast<uint32_t>(batch.label_width),
                   0,
                   0};
  // The arrays, checksummed as one run of bytes.
  struct Array {
    const void* data;
    size_t bytes;
  };
  const Array arrays[] = {
      {batch.labels.data(), batch.labels.size() * sizeof(float)},
      {batch.row_offsets.data(), batch.row_offsets.size() * sizeof(uint64_t)},
      {batch.indices.data(), batch.indices.size() * sizeof(uint64_t)},
      {batch.values.data(), batch.values.size() * sizeof(float)},
      {prepared.keys.data(), prepared.keys.size() * sizeof(Key)},
      {prepared.positions.data(), prepared.positions.size() * sizeof(uint32_t)},
      {prepared.key_offsets.data(), prepared.key_offsets.size() * sizeof(uint32_t)},
      {prepared.nonzeros_by_key.data(), prepared.nonzeros_by_key.size() * sizeof(uint32_t)},
  };
  std::string payload;
  payload.reserve(PayloadBytes(head));
  for (const Array& array : arrays) {
    payload.append(static_cast<const char*>(array.data), array.bytes);
  }
  head.checksum = WordChecksum64(payload.data(), payload.size());
  if (!Write(&head, sizeof(head)) || !Write(payload.data(), payload.size())) return false;
  ++batches_;
  rows_ += batch.rows();
  return true;
}

bool BatchCacheWriter::Seal(uint64_t skipped_records, uint64_t bytes_read) {
  Footer footer{batches_, rows_, skipped_records, bytes_read, 0, {}};
  std::memcpy(footer.magic, kEndMagic, sizeof(kEndMagic));
  footer.checksum = FooterChecksum(footer);
  if (!Write(&footer, sizeof(footer))) return false;
  // Flush what the buffer holds.
  std::vector<char> rest;
  rest.swap(buffer_);
  for (size_t done = 0; done < rest.size();) {
    const ssize_t wrote = write(descriptor_, rest.data() + done, rest.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      GiveUp("cannot write: " + ErrnoText(errno));
      return false;
    }
    done += static_cast<size_t>(wrote);
  }
  if (rename(temporary_.c_str(), path_.c_str()) != 0) {
    GiveUp("cannot rename " + temporary_ + ": " + ErrnoText(errno));
    return false;
  }
  close(descriptor_);
  descriptor_ = -1;
  LOG(INFO) << "batch cache " << path_ << ": " << batches_ << " minibatches, " << rows_
            << " rows, " << written_ << " bytes";
  return true;
}

BatchCache::BatchCache(std::string folder, std::string name, uint64_t max_bytes)
    : folder_(std::move(folder)), max_bytes_(max_bytes) {
  MakeDirectories(folder_);
  path_ = folder_ + "/" + name;
  RemoveAbandonedFiles(folder_);
}

std::unique_ptr<BatchCacheReader> BatchCache::OpenReader(uint64_t key) {
  const int descriptor = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) return nullptr;
  struct stat info;
  if (fstat(descriptor, &info) != 0 || !S_ISREG(info.st_mode) || info.st_size == 0) {
    close(descriptor);
    return nullptr;
  }
  const size_t size = static_cast<size_t>(info.st_size);
  void* data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, descriptor, 0);
  close(descriptor);
  if (data == MAP_FAILED) {
    LOG(WARNING) << "cannot map the batch cache " << path_ << ": " << ErrnoText(errno)
                 << "; parsing the text";
    return nullptr;
  }
  std::unique_ptr<BatchCacheReader> reader(
      new BatchCacheReader(path_, static_cast<const char*>(data), size));
  const std::string identity = FileVersion(info) + ":" + std::to_string(info.st_size);
  try {
    reader->Check(key, /*verify=*/identity != verified_);
  } catch (const Error& e) {
    LOG(WARNING) << "removed the batch cache: " << e.what() << "; parsing the text";
    unlink(path_.c_str());
    return nullptr;
  }
  verified_ = identity;
  return reader;
}

std::unique_ptr<BatchCacheWriter> BatchCache::OpenWriter(uint64_t key) {
  const std::string temporary =
      path_ + "." + std::to_string(getpid()) + "." + std::to_string(reinterpret_cast<uintptr_t>(this)) +
      kTemporarySuffix;
  const int descriptor =
      open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (descriptor < 0) {
    LOG(WARNING) << "no batch cache: cannot create " << temporary << ": " << ErrnoText(errno);
    return nullptr;
  }
  // Held while writing: a file whose lock is free was left by a writer that is gone.
  if (!TryLock(descriptor)) {
    close(descriptor);
    return nullptr;
  }
  return std::unique_ptr<BatchCacheWriter>(
      new BatchCacheWriter(path_, temporary, descriptor, key, max_bytes_));
}

TemporaryCacheFolder::TemporaryCacheFolder() {
  const char* tmp = std::getenv("TMPDIR");
  const std::string parent = tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp";
  // Folders of processes that are gone: their lock is free.
  if (DIR* listing = opendir(parent.c_str())) {
    for (struct dirent* entry = readdir(listing); entry != nullptr; entry = readdir(listing)) {
      if (std::strncmp(entry->d_name, kFolderPrefix, sizeof(kFolderPrefix) - 1) != 0) continue;
      const std::string folder = parent + "/" + entry->d_name;
      const int descriptor = open((folder + "/" + kLockName).c_str(), O_RDONLY | O_CLOEXEC);
      if (descriptor < 0) continue;
      // A folder made a moment ago may not be locked yet by its owner.
      struct stat info;
      const bool old = fstat(descriptor, &info) == 0 && info.st_mtime + 60 < time(nullptr);
      if (old && TryLock(descriptor)) {
        std::error_code ignored;
        std::filesystem::remove_all(folder, ignored);
        LOG(WARNING) << "removed " << folder << ", the batch cache of a process that is gone";
      }
      close(descriptor);
    }
    closedir(listing);
  }
  std::string pattern = parent + "/" + kFolderPrefix + "XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    throw MakeError("cannot create a cache folder in ", parent, ": ", ErrnoText(errno),
                    " (set --cache_dir=DIR, or none)");
  }
  path_ = pattern;
  lock_ = open((path_ + "/" + kLockName).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (lock_ < 0 || !TryLock(lock_)) {
    throw MakeError("cannot lock the cache folder ", path_, ": ", ErrnoText(errno));
  }
}

TemporaryCacheFolder::~TemporaryCacheFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
  if (lock_ >= 0) close(lock_);
}

}  // namespace keel
