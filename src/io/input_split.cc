#include "io/input_split.h"

#include <dirent.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "base/files.h"
#include "base/time.h"
#include "io/storage.h"

namespace keel {
namespace {

// Throws unless `path` can be opened for reading.
void CheckReadable(const std::string& path) {
  if (access(path.c_str(), R_OK) != 0) {
    throw MakeError(path, ": cannot read: ", ErrnoText(errno));
  }
}

const char kFileScheme[] = "file://";

bool IsFileUri(const std::string& path) { return path.rfind(kFileScheme, 0) == 0; }

// A file:// URI's path; anything else unchanged.
std::string LocalPath(const std::string& path) {
  return IsFileUri(path) ? path.substr(sizeof kFileScheme - 1) : path;
}

bool IsObjectUri(const std::string& path) { return path.rfind("s3://", 0) == 0; }

// An object URI's storage (its "folder") and key (its last part).
std::pair<std::unique_ptr<Storage>, std::string> OpenObject(const std::string& uri) {
  const size_t slash = uri.rfind('/');
  if (slash == std::string::npos || slash + 1 == uri.size() || slash < uri.find("://") + 3) {
    throw MakeError(uri, ": does not name an object");
  }
  return {OpenStorage(uri.substr(0, slash)), uri.substr(slash + 1)};
}

bool IsInputName(const std::string& name) {
  return !name.empty() && name[0] != '.' && name[0] != '_';
}

// The objects directly under a storage URI, or the object it names.
std::vector<InputFile> ListObjects(const std::string& uri) {
  std::unique_ptr<Storage> storage = OpenStorage(uri);
  const std::vector<ObjectInfo> objects = storage->List("");
  std::vector<InputFile> files;
  for (const ObjectInfo& object : objects) {
    if (object.key.find('/') == std::string::npos && IsInputName(object.key)) {
      files.push_back(InputFile{storage->UriOf(object.key), object.size, object.version});
    }
  }
  if (!files.empty()) return files;  // sorted by key, as List returns them
  if (!objects.empty()) {
    throw MakeError(uri, ": prefix holds no input objects (names starting with '.' or '_' ",
                    "and deeper prefixes are ignored)");
  }
  if (uri.back() != '/') {
    auto [parent, key] = OpenObject(uri);
    for (const ObjectInfo& object : parent->List(key)) {
      if (object.key == key) return {InputFile{uri, object.size, object.version}};
    }
  }
  throw MakeError(uri, ": no such object or prefix");
}

void CheckWorker(int rank, int workers) {
  if (workers < 1 || rank < 0 || rank >= workers) {
    throw MakeError("worker rank ", rank, " of ", workers,
                    " workers: need workers >= 1 and 0 <= rank < workers");
  }
}

}  // namespace

std::string InputSplit::Describe() const {
  if (is_pipe) return "pipe:" + path;
  if (begin == 0 && end == UINT64_MAX) return path;
  std::string text = path + "[" + std::to_string(begin) + ", ";
  text += end == UINT64_MAX ? std::string("end") : std::to_string(end);
  return text + ")";
}

std::vector<InputFile> ListInputs(const std::string& uri) {
  if (uri.empty()) throw MakeError("input path is empty");
  if (IsObjectUri(uri)) return ListObjects(uri);
  const std::string path = LocalPath(uri);
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    throw MakeError(path, ": cannot read: ", ErrnoText(errno));
  }
  if (S_ISREG(info.st_mode)) {
    CheckReadable(path);
    return {InputFile{path, static_cast<uint64_t>(info.st_size), FileVersion(info)}};
  }
  if (!S_ISDIR(info.st_mode)) {
    throw MakeError(path, ": is not a regular file or folder (for a stream, use pipe:", path, ")");
  }
  DIR* folder = opendir(path.c_str());
  if (folder == nullptr) throw MakeError(path, ": cannot list: ", ErrnoText(errno));
  std::vector<InputFile> files;
  const std::string prefix = path.back() == '/' ? path : path + "/";
  for (struct dirent* entry = readdir(folder); entry != nullptr; entry = readdir(folder)) {
    const char* name = entry->d_name;
    if (name[0] == '.' || name[0] == '_') continue;
    std::string file = prefix + name;
    struct stat file_info;
    if (stat(file.c_str(), &file_info) != 0 || !S_ISREG(file_info.st_mode)) continue;
    files.push_back(InputFile{std::move(file), static_cast<uint64_t>(file_info.st_size),
                              FileVersion(file_info)});
  }
  closedir(folder);
  if (files.empty()) {
    throw MakeError(path, ": folder holds no input files (names starting with '.' or '_' ",
                    "and subfolders are ignored)");
  }
  std::sort(files.begin(), files.end(),
            [](const InputFile& a, const InputFile& b) { return a.path < b.path; });
  for (const InputFile& file : files) CheckReadable(file.path);
  return files;
}

std::vector<InputSplit> ShardInputs(const std::vector<InputFile>& files, int rank, int workers) {
  CheckWorker(rank, workers);
  std::vector<InputSplit> splits;
  if (files.size() >= static_cast<size_t>(workers)) {
    for (size_t i = rank; i < files.size(); i += workers) {
      splits.push_back(
          InputSplit{files[i].path, 0, files[i].size, false, files[i].size, files[i].version});
    }
    return splits;
  }
  unsigned __int128 total = 0;
  for (const InputFile& file : files) total += file.size;
  // Worker r owns bytes [total * r / workers, total * (r + 1) / workers) of the concatenation.
  const uint64_t range_begin = static_cast<uint64_t>(total * rank / workers);
  const uint64_t range_end = static_cast<uint64_t>(total * (rank + 1) / workers);
  uint64_t file_begin = 0;  // the file's first byte in the concatenation
  for (const InputFile& file : files) {
    const uint64_t file_end = file_begin + file.size;
    const uint64_t begin = std::max(range_begin, file_begin);
    const uint64_t end = std::min(range_end, file_end);
    if (begin < end) {
      splits.push_back(InputSplit{file.path, begin - file_begin, end - file_begin, false,
                                  file.size, file.version});
    }
    file_begin = file_end;
  }
  return splits;
}

namespace {

constexpr char kPassField[] = "{pass}";

// `text` with every `field` replaced by `value`.
std::string Substituted(std::string text, const std::string& field, const std::string& value) {
  for (size_t at = text.find(field); at != std::string::npos;
       at = text.find(field, at + value.size())) {
    text.replace(at, field.size(), value);
  }
  return text;
}

}  // namespace

bool IsPipeChannel(const std::string& spec) { return spec.rfind("pipe:", 0) == 0; }

bool IsPipePerPass(const std::string& spec) {
  return IsPipeChannel(spec) && spec.find(kPassField) != std::string::npos;
}

std::vector<InputSplit> ResolveChannel(const std::string& spec, int rank, int workers, int pass) {
  CheckWorker(rank, workers);
  const std::string kPipe = "pipe:";
  if (!IsPipeChannel(spec)) {
    return ShardInputs(ListInputs(spec), rank, workers);
  }
  if (pass < 0) throw MakeError("channel '", spec, "': pass ", pass, " is negative");
  const std::string stream = Substituted(spec.substr(kPipe.size()), "{rank}", std::to_string(rank));
  if (stream.empty()) throw MakeError("channel '", spec, "': pipe: needs a path");
  InputSplit split{
      Substituted(stream, kPassField, std::to_string(pass)), 0, UINT64_MAX, true, 0, ""};
  if (split.path != stream) split.stream = stream;
  return {split};
}

void AwaitStream(const InputSplit& split, double timeout_s) {
  if (!split.is_pipe) return;
  struct stat info;
  const double begin = MonotonicSeconds();
  bool said = false;
  while (stat(split.path.c_str(), &info) != 0) {
    const double waited = MonotonicSeconds() - begin;
    if (waited >= timeout_s) {
      throw MakeError(split.Describe(), ": not there after waiting ", timeout_s, " s for it (",
                      std::strerror(errno), ")");
    }
    if (!said && waited >= 1) {
      LOG(INFO) << "waiting for " << split.Describe() << " to appear";
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Reads an object with ranged GETs on a background thread, `ahead` blocks
// ahead of the reader.
class ObjectPrefetcher {
 public:
  ObjectPrefetcher(const std::string& uri, uint64_t offset, size_t block_size, size_t ahead)
      : uri_(uri), next_(offset), block_size_(block_size), ahead_(ahead) {
    auto [storage, key] = OpenObject(uri);
    storage_ = std::move(storage);
    key_ = std::move(key);
    for (const ObjectInfo& object : storage_->List(key_)) {
      if (object.key == key_) size_ = object.size;
    }
    if (size_ == UINT64_MAX) throw MakeError(uri, ": cannot open: no such object");
    thread_ = std::thread([this] { Run(); });
  }

  ~ObjectPrefetcher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

  uint64_t size() const { return size_; }

  // Up to `count` bytes; 0 at the end. Throws the Error a fetch ended with.
  size_t Read(char* destination, size_t count) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !blocks_.empty() || done_; });
    if (blocks_.empty()) {
      if (error_) std::rethrow_exception(error_);
      return 0;
    }
    const std::string& block = blocks_.front();
    const size_t n = std::min(count, block.size() - consumed_);
    std::memcpy(destination, block.data() + consumed_, n);
    consumed_ += n;
    if (consumed_ == block.size()) {
      blocks_.pop_front();
      consumed_ = 0;
      changed_.notify_all();
    }
    return n;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_ && next_ < size_) {
      if (blocks_.size() >= ahead_) {
        changed_.wait(lock, [&] { return stop_ || blocks_.size() < ahead_; });
        continue;
      }
      const uint64_t offset = next_;
      const uint64_t length = std::min<uint64_t>(block_size_, size_ - offset);
      lock.unlock();
      std::string block;
      std::exception_ptr error;
      try {
        block = storage_->GetRange(key_, offset, length);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error) {
        error_ = error;
        break;
      }
      // A shorter block than asked for: the object shrank; its end is here.
      next_ = block.size() < length ? size_ : offset + block.size();
      if (!block.empty()) blocks_.push_back(std::move(block));
      changed_.notify_all();
    }
    done_ = true;
    changed_.notify_all();
  }

  const std::string uri_;
  std::unique_ptr<Storage> storage_;
  std::string key_;
  uint64_t size_ = UINT64_MAX;
  uint64_t next_;  // the offset of the next block to fetch
  const size_t block_size_;
  const size_t ahead_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> blocks_;
  size_t consumed_ = 0;  // bytes of blocks_.front() already read
  bool stop_ = false, done_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

BlockReader::BlockReader(const std::string& uri, bool is_pipe, uint64_t offset, size_t block_size)
    : path_(uri), buffer_(std::max<size_t>(block_size, 16)) {
  if (IsObjectUri(uri)) {
    if (is_pipe) throw MakeError("pipe:", uri, ": an object cannot be read as a stream");
    const size_t fetch = std::clamp<size_t>(2 * block_size, size_t{1} << 20, size_t{8} << 20);
    object_ = std::make_unique<ObjectPrefetcher>(uri, offset, fetch, 2);
    file_size_ = object_->size();
    position_ = offset;
    return;
  }
  const std::string path = LocalPath(uri);
  descriptor_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor_ < 0) throw MakeError(path, ": cannot open: ", ErrnoText(errno));
  struct stat info;
  if (!is_pipe && fstat(descriptor_, &info) == 0 && S_ISREG(info.st_mode)) {
    file_size_ = static_cast<uint64_t>(info.st_size);
    if (offset > 0 && lseek(descriptor_, static_cast<off_t>(offset), SEEK_SET) < 0) {
      const std::string problem = ErrnoText(errno);
      close(descriptor_);
      throw MakeError(path, ": cannot seek to byte ", offset, ": ", problem);
    }
    position_ = offset;
    posix_fadvise(descriptor_, 0, 0, POSIX_FADV_SEQUENTIAL);
  } else if (!is_pipe && offset > 0) {
    close(descriptor_);
    throw MakeError(path, ": cannot start at byte ", offset,
                    " of something that is not a regular file (for a stream, use pipe:", path, ")");
  }
}

BlockReader::~BlockReader() {
  if (descriptor_ >= 0) close(descriptor_);
}

size_t BlockReader::ReadSome(char* destination, size_t count) {
  if (object_) return object_->Read(destination, count);
  for (;;) {
    const ssize_t got = read(descriptor_, destination, count);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno != EINTR) {
      throw MakeError(path_, "@", position_ + end_ - begin_, ": read failed: ", ErrnoText(errno));
    }
  }
}

bool BlockReader::Fill(size_t count) {
  if (size() >= count) return true;
  if (at_end_) return false;
  // Move the window to the front, and grow the buffer if the request does not fit.
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, size());
    end_ -= begin_;
    begin_ = 0;
  }
  if (count > buffer_.size()) buffer_.resize(std::max(count, 2 * buffer_.size()));
  while (end_ < count) {
    const size_t got = ReadSome(buffer_.data() + end_, buffer_.size() - end_);
    if (got == 0) {
      at_end_ = true;
      return false;
    }
    end_ += got;
  }
  return true;
}

}  // namespace keel
