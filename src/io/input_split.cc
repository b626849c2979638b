#include "io/input_split.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kv/error.h"

namespace keel {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

// Throws unless `path` can be opened for reading.
void CheckReadable(const std::string& path) {
  if (access(path.c_str(), R_OK) != 0) {
    throw MakeError(path, ": cannot read: ", ErrnoText());
  }
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

std::vector<InputFile> ListInputs(const std::string& path) {
  if (path.empty()) throw MakeError("input path is empty");
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    throw MakeError(path, ": cannot read: ", ErrnoText());
  }
  if (S_ISREG(info.st_mode)) {
    CheckReadable(path);
    return {InputFile{path, static_cast<uint64_t>(info.st_size)}};
  }
  if (!S_ISDIR(info.st_mode)) {
    throw MakeError(path, ": is not a regular file or folder (for a stream, use pipe:", path, ")");
  }
  DIR* folder = opendir(path.c_str());
  if (folder == nullptr) throw MakeError(path, ": cannot list: ", ErrnoText());
  std::vector<InputFile> files;
  const std::string prefix = path.back() == '/' ? path : path + "/";
  for (struct dirent* entry = readdir(folder); entry != nullptr; entry = readdir(folder)) {
    const char* name = entry->d_name;
    if (name[0] == '.' || name[0] == '_') continue;
    std::string file = prefix + name;
    struct stat file_info;
    if (stat(file.c_str(), &file_info) != 0 || !S_ISREG(file_info.st_mode)) continue;
    files.push_back(InputFile{std::move(file), static_cast<uint64_t>(file_info.st_size)});
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
      splits.push_back(InputSplit{files[i].path, 0, files[i].size, false});
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
      splits.push_back(InputSplit{file.path, begin - file_begin, end - file_begin, false});
    }
    file_begin = file_end;
  }
  return splits;
}

std::vector<InputSplit> ResolveChannel(const std::string& spec, int rank, int workers) {
  CheckWorker(rank, workers);
  const std::string kPipe = "pipe:";
  if (spec.compare(0, kPipe.size(), kPipe) != 0) {
    return ShardInputs(ListInputs(spec), rank, workers);
  }
  std::string path = spec.substr(kPipe.size());
  if (path.empty()) throw MakeError("channel '", spec, "': pipe: needs a path");
  const std::string kRank = "{rank}";
  const std::string rank_text = std::to_string(rank);
  for (size_t at = path.find(kRank); at != std::string::npos;
       at = path.find(kRank, at + rank_text.size())) {
    path.replace(at, kRank.size(), rank_text);
  }
  return {InputSplit{path, 0, UINT64_MAX, true}};
}

BlockReader::BlockReader(const std::string& path, bool is_pipe, uint64_t offset, size_t block_size)
    : path_(path), buffer_(std::max<size_t>(block_size, 16)) {
  descriptor_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor_ < 0) throw MakeError(path, ": cannot open: ", ErrnoText());
  struct stat info;
  if (!is_pipe && fstat(descriptor_, &info) == 0 && S_ISREG(info.st_mode)) {
    file_size_ = static_cast<uint64_t>(info.st_size);
    if (offset > 0 && lseek(descriptor_, static_cast<off_t>(offset), SEEK_SET) < 0) {
      const std::string problem = ErrnoText();
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
    const ssize_t got = read(descriptor_, buffer_.data() + end_, buffer_.size() - end_);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw MakeError(path_, "@", position_ + end_, ": read failed: ", ErrnoText());
    }
    if (got == 0) {
      at_end_ = true;
      return false;
    }
    end_ += static_cast<size_t>(got);
  }
  return true;
}

}  // namespace keel
