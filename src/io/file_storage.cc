// The file:// backend: objects are files under a root folder.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

#include "base/files.h"
#include "io/storage.h"

namespace keel {
namespace {

// Temporary files of a Put in progress start with this; List skips them.
constexpr char kTempPrefix[] = ".keel-tmp-";

class FileStorage : public Storage {
 public:
  explicit FileStorage(std::string root) : root_(std::move(root)) {}

  void Put(const std::string& key, std::string_view data) override {
    PutPieces(key, [data](const PieceSink& sink) { sink(data); });
  }

  void PutPieces(const std::string& key,
                 const std::function<void(const PieceSink&)>& produce) override {
    const std::string path = PathOf(key);
    const std::string folder = ParentFolder(path);
    auto make_folder = [&] {
      try {
        MakeDirectories(folder);
      } catch (const Error& error) {
        throw MakeError(UriOf(key), ": ", error.what());
      }
    };
    make_folder();
    static std::atomic<uint64_t> counter{0};
    const std::string temp = folder + "/" + kTempPrefix + path.substr(folder.size() + 1) + "-" +
                             std::to_string(getpid()) + "-" + std::to_string(counter++);
    int descriptor = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (descriptor < 0 && errno == ENOENT) {
      make_folder();  // a Delete of the folder's last object removed it meanwhile
      descriptor = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    if (descriptor < 0) {
      throw MakeError(UriOf(key), ": cannot create ", temp, ": ", ErrnoText(errno));
    }
    int error = 0;
    auto sink = [&](std::string_view data) {
      for (size_t written = 0; written < data.size() && error == 0;) {
        const ssize_t count = write(descriptor, data.data() + written, data.size() - written);
        if (count < 0 && errno != EINTR) error = errno;
        if (count > 0) written += static_cast<size_t>(count);
      }
    };
    try {
      produce(sink);
    } catch (...) {
      close(descriptor);
      unlink(temp.c_str());
      throw;
    }
    if (error == 0 && fsync(descriptor) != 0) error = errno;
    if (close(descriptor) != 0 && error == 0) error = errno;
    if (error == 0 && rename(temp.c_str(), path.c_str()) != 0) error = errno;
    if (error != 0) {
      unlink(temp.c_str());
      throw MakeError(UriOf(key), ": write failed: ", ErrnoText(error));
    }
    // Make the rename itself durable.
    const int folder_descriptor = open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (folder_descriptor >= 0) {
      fsync(folder_descriptor);
      close(folder_descriptor);
    }
  }

  std::string Get(const std::string& key) override { return Read(key, 0, UINT64_MAX); }

  std::string GetRange(const std::string& key, uint64_t offset, uint64_t length) override {
    return Read(key, offset, length);
  }

  std::vector<ObjectInfo> List(const std::string& prefix) override {
    CheckPrefix(prefix);
    std::vector<ObjectInfo> objects;
    // Walk only the folder the prefix's folder part names.
    const size_t slash = prefix.rfind('/');
    const std::string start = slash == std::string::npos ? "" : prefix.substr(0, slash + 1);
    Walk(start, prefix, &objects);
    std::sort(objects.begin(), objects.end(),
              [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return objects;
  }

  // As in an object store, a folder is there while it holds objects: the
  // folders the object's deletion leaves empty go with it (a folder another
  // writer fills meanwhile stays: rmdir refuses a folder that is not empty).
  void Delete(const std::string& key) override {
    const std::string path = PathOf(key);
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      throw MakeError(UriOf(key), ": cannot delete: ", ErrnoText(errno));
    }
    for (std::string folder = ParentFolder(path); folder.size() > root_.size();
         folder = ParentFolder(folder)) {
      if (rmdir(folder.c_str()) != 0) break;
    }
  }

  std::string UriOf(const std::string& key) const override {
    return "file://" + root_ + (key.empty() ? "" : "/" + key);
  }

 private:
  // Keys are relative, '/'-separated, without empty, "." or ".." parts.
  void CheckKey(const std::string& key) const {
    if (key.empty()) throw MakeError(UriOf(""), ": empty object key");
    CheckPrefix(key);
    if (key.back() == '/') throw MakeError(UriOf(key), ": object key ends with '/'");
  }

  void CheckPrefix(const std::string& prefix) const {
    size_t begin = 0;
    while (begin < prefix.size()) {
      size_t end = prefix.find('/', begin);
      if (end == std::string::npos) end = prefix.size();
      const std::string_view part(prefix.data() + begin, end - begin);
      const bool last = end == prefix.size();
      if ((part.empty() && !last) || part == "." || part == "..") {
        throw MakeError(UriOf(prefix), ": bad key '", prefix,
                        "' (keys are relative, without empty, '.' or '..' parts)");
      }
      begin = end + 1;
    }
  }

  std::string PathOf(const std::string& key) const {
    CheckKey(key);
    return root_ + "/" + key;
  }

  std::string Read(const std::string& key, uint64_t offset, uint64_t length) {
    const std::string path = PathOf(key);
    const int descriptor = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) {
      const int error = errno;
      if (error == ENOENT || error == ENOTDIR) throw NotFoundError(UriOf(key) + ": no such object");
      throw MakeError(UriOf(key), ": cannot open: ", ErrnoText(error));
    }
    struct stat info;
    if (fstat(descriptor, &info) != 0 || !S_ISREG(info.st_mode)) {
      close(descriptor);
      throw NotFoundError(UriOf(key) + ": no such object (not a regular file)");
    }
    const uint64_t size = static_cast<uint64_t>(info.st_size);
    const uint64_t begin = std::min(offset, size);
    const uint64_t count = std::min(length, size - begin);
    std::string data(count, '\0');
    uint64_t done = 0;
    while (done < count) {
      const ssize_t got =
          pread(descriptor, data.data() + done, count - done, static_cast<off_t>(begin + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        const int error = errno;
        close(descriptor);
        throw MakeError(UriOf(key), "@", begin + done, ": read failed: ", ErrnoText(error));
      }
      if (got == 0) break;  // the file shrank
      done += static_cast<uint64_t>(got);
    }
    close(descriptor);
    data.resize(done);
    return data;
  }

  // Adds the files under root/`folder` (a key prefix ending in '/', or empty)
  // whose keys start with `prefix`.
  void Walk(const std::string& folder, const std::string& prefix,
            std::vector<ObjectInfo>* objects) const {
    const std::string path = folder.empty() ? root_ : root_ + "/" + folder;
    DIR* listing = opendir(path.c_str());
    if (listing == nullptr) {
      if (errno == ENOENT || errno == ENOTDIR) return;
      throw MakeError(UriOf(folder), ": cannot list: ", ErrnoText(errno));
    }
    for (struct dirent* entry = readdir(listing); entry != nullptr; entry = readdir(listing)) {
      const std::string name = entry->d_name;
      if (name == "." || name == ".." || name.rfind(kTempPrefix, 0) == 0) continue;
      const std::string key = folder + name;
      struct stat info;
      if (stat((path + "/" + name).c_str(), &info) != 0) continue;  // removed meanwhile
      if (S_ISDIR(info.st_mode)) {
        // Descend only where keys can still match the prefix.
        const std::string sub = key + "/";
        const size_t common = std::min(sub.size(), prefix.size());
        if (sub.compare(0, common, prefix, 0, common) == 0) Walk(sub, prefix, objects);
      } else if (S_ISREG(info.st_mode) && key.compare(0, prefix.size(), prefix) == 0) {
        objects->push_back(ObjectInfo{key, static_cast<uint64_t>(info.st_size), FileVersion(info)});
      }
    }
    closedir(listing);
  }

  std::string root_;  // absolute, without a trailing '/'
};

}  // namespace

std::unique_ptr<Storage> OpenFileStorage(const std::string& root) {
  std::string path = root;
  const std::string kScheme = "file://";
  if (path.compare(0, kScheme.size(), kScheme) == 0) path = path.substr(kScheme.size());
  if (path.empty()) throw MakeError("storage '", root, "': empty path");
  if (path[0] != '/') {
    char here[PATH_MAX];
    if (getcwd(here, sizeof here) == nullptr) {
      throw MakeError("storage '", root, "': cannot find the current folder: ", ErrnoText(errno));
    }
    path = std::string(here) + "/" + path;
  }
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return std::make_unique<FileStorage>(path);
}

}  // namespace keel
