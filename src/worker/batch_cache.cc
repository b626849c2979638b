#include "worker/batch_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
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
#include "base/mapped_read.h"
#include "worker/prepared_batch.h"

namespace keel {
namespace {

// File: header, batches, footer. Each batch: a BatchHeader, then its arrays
// in the order of PreparedBatch (labels, row offsets, indices, values, keys,
// positions, key offsets, non-zeros by key). Numbers are in the machine's
// byte order; the header's byte-order mark rejects a file from another.
constexpr char kMagic[8] = {'K', 'E', 'E', 'L', 'B', 'C', 'H', '1'};
constexpr char kEndMagic[8] = {'K', 'E', 'E', 'L', 'B', 'E', 'N', 'D'};
// 2: the batches scaled, the scaling's fingerprint in the header.
constexpr uint32_t kVersion = 2;
constexpr uint32_t kByteOrder = 0x01020304;
constexpr char kTemporarySuffix[] = ".partial";
constexpr char kFolderPrefix[] = "keel-cache-";
constexpr char kLockName[] = ".lock";
// What a read of the mapping says when the file no longer holds its bytes.
constexpr char kTruncated[] = "the file was truncated while in use: another process cut it short";
// Bounds on a batch's claims, far above any minibatch a job makes.
constexpr uint32_t kMaxLabelWidth = 1 << 16;

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t byte_order;
  uint64_t key;
  uint64_t scaling;  // DataScaler::fingerprint() of the batches' scaling; 0: none
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

// Opens `path` for reading only if it is a regular file of this user, never
// following a symbolic link and never blocking (a FIFO put in a shared
// temporary folder must not hang a worker); -1 otherwise.
int OpenOwnFile(const std::string& path, struct stat* info) {
  const int descriptor = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (descriptor < 0) return -1;
  if (fstat(descriptor, info) != 0 || !S_ISREG(info->st_mode) || info->st_uid != geteuid()) {
    close(descriptor);
    return -1;
  }
  return descriptor;
}

// What a reader compares to know whether it verified this very file.
std::string FileIdentity(const struct stat& info) {
  return FileVersion(info) + ":" + std::to_string(info.st_size);
}

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
    struct stat info;
    const int descriptor = OpenOwnFile(path, &info);
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

}  // namespace

uint64_t BatchCacheKey(const std::vector<InputSplit>& splits, const ReaderOptions& reader,
                       size_t batch_size) {
  // The format's version and this build's key mixing: a kept folder read by
  // a build that mixes keys otherwise holds nothing valid for it.
  std::string text = "batch cache " + std::to_string(kVersion) + " " +
                     std::to_string(MixKey(12345)) + "\n";
  const auto add = [&](const auto&... fields) {
    ((text += std::to_string(fields), text += ' '), ...);
    text += '\n';
  };
  add(static_cast<int>(reader.format), reader.zero_based, reader.skip_bad_records,
      reader.feature_dim, static_cast<int>(reader.labels), reader.num_classes, batch_size,
      reader.holdout_share, reader.holdout_side, reader.labelled);
  for (const InputSplit& split : splits) {
    // A stream given once per pass is the same stream whatever the pass.
    text += (split.stream.empty() ? split.path : split.stream) + "\n" + split.version + "\n";
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

void BatchCacheReader::Copy(size_t at, void* to, size_t bytes) const {
  if (!CopyMapped(to, data_ + at, bytes)) throw Error(kTruncated);
}

uint64_t BatchCacheReader::Checksum(size_t at, size_t bytes) const {
  uint64_t checksum = 0;
  auto sum = [&] { checksum = WordChecksum64(data_ + at, bytes); };
  if (!ReadMapped(sum)) throw Error(kTruncated);
  return checksum;
}

template <typename T>
size_t BatchCacheReader::CopyArray(size_t at, uint64_t count, std::vector<T>* out) const {
  out->resize(count);
  if (count > 0) Copy(at, out->data(), count * sizeof(T));
  return at + count * sizeof(T);
}

size_t BatchCacheReader::DecodeBatch(size_t at, bool full, PreparedBatch* out) const {
  BatchHeader head;
  if (end_ - at < sizeof(head)) throw MakeError("cut off");
  Copy(at, &head, sizeof(head));
  const uint64_t payload = PayloadBytes(head);
  if (payload == 0 || head.label_width == 0 || head.label_width > kMaxLabelWidth ||
      payload > end_ - at - sizeof(head) || head.nnz > UINT32_MAX || head.keys > head.nnz) {
    throw MakeError("claims more than the file holds");
  }
  size_t from = at + sizeof(head);
  Batch& batch = out->batch;
  batch.label_width = static_cast<int>(head.label_width);
  from = CopyArray(from, head.rows * head.label_width, &batch.labels);
  from = CopyArray(from, head.rows + 1, &batch.row_offsets);
  from = CopyArray(from, head.nnz, &batch.indices);
  from = CopyArray(from, head.nnz, &batch.values);
  std::vector<Key> keys;
  from = CopyArray(from, head.keys, &keys);
  from = CopyArray(from, head.nnz, &out->positions);
  from = CopyArray(from, head.keys + 1, &out->key_offsets);
  CopyArray(from, head.nnz, &out->nonzeros_by_key);
  // Everything the compute and the requests rely on, as PrepareKeys makes it:
  // rows in order; keys strictly ascending, each holding at least one
  // non-zero; every position and non-zero in range; and (`full`) each key the
  // mix of its non-zeros' feature, positions and non-zeros by key inverse of
  // each other.
  const std::vector<uint64_t>& rows = batch.row_offsets;
  const std::vector<uint32_t>& offsets = out->key_offsets;
  if (rows.front() != 0 || rows.back() != head.nnz || offsets.front() != 0 ||
      offsets.back() != head.nnz) {
    throw MakeError("offsets out of range");
  }
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r] < rows[r - 1]) throw MakeError("row offsets go back");
  }
  for (size_t u = 0; u < keys.size(); ++u) {
    if (offsets[u + 1] <= offsets[u]) throw MakeError("a key without non-zeros");
    if (u > 0 && keys[u] <= keys[u - 1]) throw MakeError("keys out of order");
  }
  if (full) {
    for (size_t u = 0; u < keys.size(); ++u) {
      for (uint32_t e = offsets[u]; e < offsets[u + 1]; ++e) {
        const uint32_t nonzero = out->nonzeros_by_key[e];
        if (nonzero >= head.nnz || out->positions[nonzero] != u ||
            MixKey(batch.indices[nonzero]) != keys[u]) {
          throw MakeError("a non-zero's key does not match its feature");
        }
      }
    }
  } else {
    uint32_t bad = 0;
    for (uint32_t position : out->positions) bad |= position >= head.keys;
    for (uint32_t nonzero : out->nonzeros_by_key) bad |= nonzero >= head.nnz;
    if (bad) throw MakeError("a position out of range");
  }
  out->keys = SharedArray<const Key>(std::move(keys));
  return at + sizeof(head) + payload;
}

void BatchCacheReader::Check(uint64_t key, bool verify) {
  FileHeader header;
  Footer footer;
  if (size_ < sizeof(header) + sizeof(footer)) {
    throw MakeError(path_, ": ", size_, " bytes, too short for a batch cache");
  }
  try {
    Copy(0, &header, sizeof(header));
    Copy(size_ - sizeof(footer), &footer, sizeof(footer));
  } catch (const Error& e) {
    throw MakeError(path_, ": ", e.what());
  }
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0 || header.version != kVersion ||
      header.byte_order != kByteOrder) {
    throw MakeError(path_, ": not a batch cache of this version and byte order");
  }
  if (header.key != key) throw OtherKey(path_ + ": a cache of other input (its key differs)");
  scaling_ = header.scaling;
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
  if (!verify) return;
  // Every batch decoded and checked as Next will, and its checksum.
  size_t at = offset_;
  uint64_t rows = 0;
  PreparedBatch scratch;
  for (uint64_t batch = 0; batch < batches_; ++batch) {
    size_t next = 0;
    BatchHeader head;
    uint64_t checksum = 0;
    try {
      next = DecodeBatch(at, /*full=*/true, &scratch);
      Copy(at, &head, sizeof(head));
      checksum = Checksum(at + sizeof(head), next - at - sizeof(head));
    } catch (const Error& e) {
      throw MakeError(path_, ": batch ", batch, " at byte ", at, ": ", e.what());
    }
    if (checksum != head.checksum) {
      throw MakeError(path_, ": batch ", batch, " at byte ", at, " fails its checksum");
    }
    rows += head.rows;
    at = next;
  }
  if (at != end_ || rows != rows_) {
    throw MakeError(path_, ": the batches do not add up to the footer's count");
  }
}

bool BatchCacheReader::Next(PreparedBatch* out) {
  if (read_ == batches_) return false;
  try {
    // Checked in full when this process opened the file; what a change
    // since could break in memory is checked again.
    offset_ = DecodeBatch(offset_, /*full=*/false, out);
  } catch (const Error& e) {
    throw MakeError(path_, ": batch ", read_, " at byte ", offset_, ": ", e.what(),
                    " (the file changed after it was opened)");
  }
  ++read_;
  return true;
}

BatchCacheWriter::BatchCacheWriter(std::string path, std::string temporary, int descriptor,
                                   uint64_t key, uint64_t scaling, uint64_t max_bytes,
                                   std::string* written)
    : path_(std::move(path)),
      temporary_(std::move(temporary)),
      descriptor_(descriptor),
      max_bytes_(max_bytes),
      written_identity_(written) {
  buffer_.reserve(size_t{1} << 20);
  FileHeader header;
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kVersion;
  header.byte_order = kByteOrder;
  header.key = key;
  header.scaling = scaling;
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
    GiveUp("it would pass " + std::to_string(max_bytes_) +
           " bytes (--cache_max_bytes, or half the folder's free space)");
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
  return WriteOut(pending);
}

bool BatchCacheWriter::WriteOut(const std::vector<char>& bytes) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t wrote = write(descriptor_, bytes.data() + done, bytes.size() - done);
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
  if (!WriteOut(rest)) return false;
  if (rename(temporary_.c_str(), path_.c_str()) != 0) {
    GiveUp("cannot rename " + temporary_ + ": " + ErrnoText(errno));
    return false;
  }
  // This process made every byte of it: its readers need not verify it.
  struct stat info;
  if (fstat(descriptor_, &info) == 0) *written_identity_ = FileIdentity(info);
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
  struct stat info;
  const int descriptor = OpenOwnFile(path_, &info);
  if (descriptor < 0) return nullptr;
  if (info.st_size == 0) {
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
  const std::string identity = FileIdentity(info);
  try {
    reader->Check(key, /*verify=*/identity != verified_);
  } catch (const BatchCacheReader::OtherKey&) {
    return nullptr;  // replaced by the file this pass writes
  } catch (const Error& e) {
    // Removed only if it is still the file checked (another process may
    // have renamed a new one into place meanwhile).
    struct stat now;
    if (stat(path_.c_str(), &now) == 0 && now.st_ino == info.st_ino && now.st_dev == info.st_dev) {
      unlink(path_.c_str());
    }
    LOG(WARNING) << "removed the batch cache: " << e.what() << "; parsing the text";
    return nullptr;
  }
  verified_ = identity;
  return reader;
}

void BatchCache::Discard() {
  if (unlink(path_.c_str()) != 0 && errno != ENOENT) {
    LOG(WARNING) << "cannot remove the batch cache " << path_ << ": " << ErrnoText(errno);
  }
  verified_.clear();
}

std::unique_ptr<BatchCacheWriter> BatchCache::OpenWriter(uint64_t key, uint64_t scaling) {
  const std::string temporary =
      path_ + "." + std::to_string(getpid()) + "." + std::to_string(reinterpret_cast<uintptr_t>(this)) +
      kTemporarySuffix;
  unlink(temporary.c_str());  // a leftover of this object's own earlier pass
  const int descriptor =
      open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (descriptor < 0) {
    LOG(WARNING) << "no batch cache: cannot create " << temporary << ": " << ErrnoText(errno);
    return nullptr;
  }
  // Held while writing: a file whose lock is free was left by a writer that
  // is gone. Another process's clean-up may have removed it between the
  // open and the lock: then there is no file to write.
  struct stat info;
  if (!TryLock(descriptor) || fstat(descriptor, &info) != 0 || info.st_nlink == 0) {
    close(descriptor);
    LOG(WARNING) << "no batch cache: " << temporary << " was taken away as it was made";
    return nullptr;
  }
  // At most half the folder's free space: a temporary folder may be memory.
  uint64_t bound = max_bytes_;
  struct statvfs space;
  if (statvfs(folder_.c_str(), &space) == 0) {
    bound = std::min<uint64_t>(bound, static_cast<uint64_t>(space.f_bavail) * space.f_frsize / 2);
  }
  return std::unique_ptr<BatchCacheWriter>(
      new BatchCacheWriter(path_, temporary, descriptor, key, scaling, bound, &verified_));
}

namespace {
std::string TemporaryParent() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp";
}
}  // namespace

void TemporaryCacheFolder::RemoveAbandoned() {
  const std::string parent = TemporaryParent();
  // Folders of processes that are gone: their lock is free.
  if (DIR* listing = opendir(parent.c_str())) {
    for (struct dirent* entry = readdir(listing); entry != nullptr; entry = readdir(listing)) {
      if (std::strncmp(entry->d_name, kFolderPrefix, sizeof(kFolderPrefix) - 1) != 0) continue;
      const std::string folder = parent + "/" + entry->d_name;
      struct stat info;
      const int descriptor = OpenOwnFile(folder + "/" + kLockName, &info);
      if (descriptor < 0) continue;
      // A folder made a moment ago may not be locked yet by its owner.
      const bool old = info.st_mtime + 60 < time(nullptr);
      if (old && TryLock(descriptor)) {
        std::error_code ignored;
        std::filesystem::remove_all(folder, ignored);
        LOG(WARNING) << "removed " << folder << ", the batch cache of a process that is gone";
      }
      close(descriptor);
    }
    closedir(listing);
  }
}

TemporaryCacheFolder::TemporaryCacheFolder() {
  RemoveAbandoned();
  const std::string parent = TemporaryParent();
  std::string pattern = parent + "/" + kFolderPrefix + "XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    throw MakeError("cannot create a cache folder in ", parent, ": ", ErrnoText(errno),
                    " (set --cache_dir=DIR, or none)");
  }
  path_ = pattern;
  lock_ = open((path_ + "/" + kLockName).c_str(),
               O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock_ < 0 || !TryLock(lock_)) {
    const std::string why = ErrnoText(errno);
    if (lock_ >= 0) close(lock_);
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
    throw MakeError("cannot lock the cache folder ", path_, ": ", why);
  }
}

TemporaryCacheFolder::~TemporaryCacheFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
  if (lock_ >= 0) close(lock_);
}

}  // namespace keel
