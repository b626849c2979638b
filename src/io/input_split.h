// Input splits: which bytes of a training channel each worker reads, and the
// block reader that reads them.
//
// A channel is a file, a folder of files, the objects under a storage URI
// (s3://bucket/prefix/, file:///folder/; io/storage.h), or a stream
// (SageMaker's Pipe mode: a FIFO per worker). Each worker gets a list of InputSplits; together the
// workers' splits cover every byte of the channel exactly once, and a record
// belongs to the split that holds its first byte, so every record is read by
// exactly one worker.
#ifndef KEEL_IO_INPUT_SPLIT_H_
#define KEEL_IO_INPUT_SPLIT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace keel {

// A byte range of one file (or storage object), or a whole stream.
struct InputSplit {
  std::string path;  // a local path, or an object's URI (s3://bucket/key, file:///path)
  // The byte range [begin, end). A record belongs to the split holding its
  // first byte; a reader may read past `end` to finish its last record.
  uint64_t begin = 0, end = UINT64_MAX;
  // A FIFO or other stream: read from its start to its end, no seeking;
  // begin and end are ignored.
  bool is_pipe = false;
  // The file's size and version (InputFile) when it was listed; empty for a stream.
  uint64_t file_size = 0;
  std::string version = {};
  // A stream given once per pass (a pipe whose path names "{pass}", as
  // SageMaker's Pipe mode gives train_0, train_1, ...): its path before the
  // pass was put in, which names the stream whatever the pass. Empty otherwise.
  std::string stream = {};

  // For messages: "pipe:PATH", "PATH" (a whole file) or "PATH[BEGIN, END)".
  std::string Describe() const;
};

struct InputFile {
  std::string path;
  uint64_t size = 0;
  std::string version = {};  // as ObjectInfo::version (io/storage.h)
};

// A file, or the regular files of a folder (not recursive; sorted by name;
// skipping names that start with '.' or '_'). A storage URI is listed the same
// way: the objects directly under the prefix (s3://bucket/train/ holds
// s3://bucket/train/part-0, not s3://bucket/train/old/part-0), or the one
// object the URI names. Throws Error if the path is missing, unreadable, or
// holds no files.
std::vector<InputFile> ListInputs(const std::string& path);

// The splits of worker `rank` of `workers` (0 <= rank < workers, else Error).
// When there are at least as many files as workers, whole files round-robin:
// worker r gets files r, r + workers, ... Otherwise the concatenated files
// are cut into `workers` byte ranges of equal size (boundaries need not fall
// on records: the reader skips to the first record that starts in its range),
// and worker r gets the pieces of range r, one split per file it touches.
// Every byte goes to exactly one worker; a worker may get no splits.
std::vector<InputSplit> ShardInputs(const std::vector<InputFile>& files, int rank, int workers);

// Whether a channel flag value names a stream ("pipe:PATH"), read once.
bool IsPipeChannel(const std::string& spec);

// Whether a channel flag value names a stream given anew for every pass
// ("pipe:PATH" with "{pass}" in PATH).
bool IsPipePerPass(const std::string& spec);

// The splits of worker `rank` for a channel flag value: "pipe:PATH" is a
// stream every worker reads on its own ("{rank}" in PATH is replaced by the
// rank, "{pass}" by `pass`, the count of passes over the stream read before
// this one: SageMaker's Pipe mode gives a FIFO per pass, CHANNEL_0,
// CHANNEL_1, ...); anything else is a file or folder, listed by ListInputs and
// sharded by ShardInputs (`pass` unused). Throws Error on a bad spec, rank,
// pass or path.
std::vector<InputSplit> ResolveChannel(const std::string& spec, int rank, int workers,
                                       int pass = 0);

// How long a stream given once per pass may take to appear (AwaitStream):
// SageMaker makes a channel's next FIFO once the one before it was read.
constexpr double kPassStreamWaitS = 300;

// Waits until a stream's path (split.is_pipe) exists, as a stream given
// once per pass may be made only after the pass before it was read: returns
// at once for a path that exists or a split that is not a stream; logs once
// after a second of waiting. Throws Error naming the path after `timeout_s`.
void AwaitStream(const InputSplit& split, double timeout_s);

class ObjectPrefetcher;

// Reads a file from an offset, or a stream from its start, in large blocks
// with read(2): the byte source under the record readers. An s3:// object is
// read with ranged GETs on a background thread that keeps two blocks (of
// 2 x block_size, at most 8 MiB) fetched ahead of the reader. Keeps a window
// of buffered, not yet consumed bytes; the window moves when Fill reads more,
// so pointers into it are valid only until the next Fill. Not thread-safe.
class BlockReader {
 public:
  // Opens `path` (a path, or a file:// or s3:// URI) and, unless `is_pipe`,
  // starts at byte `offset`. Opening a FIFO blocks until a writer opens it.
  // Throws Error if it cannot open.
  BlockReader(const std::string& path, bool is_pipe, uint64_t offset,
              size_t block_size = size_t{4} << 20);
  ~BlockReader();
  BlockReader(const BlockReader&) = delete;
  BlockReader& operator=(const BlockReader&) = delete;

  // The buffered bytes not consumed yet.
  const char* data() const { return buffer_.data() + begin_; }
  size_t size() const { return end_ - begin_; }
  // The offset in the file (or stream) of data()[0].
  uint64_t position() const { return position_; }
  // The file's size when opened; UINT64_MAX for a stream.
  uint64_t file_size() const { return file_size_; }
  // True once read(2) has reported the end of the input.
  bool at_end() const { return at_end_; }

  // Drops the first `count` buffered bytes; count <= size().
  void Consume(size_t count) {
    begin_ += count;
    position_ += count;
  }
  // Reads until at least `count` bytes are buffered (growing the buffer if
  // needed; reading as much as fits). Returns false if the input ends first,
  // with all the remaining bytes buffered. Throws Error if a read fails.
  bool Fill(size_t count);

 private:
  // Up to `count` bytes into `destination`; 0 at the end of the input.
  size_t ReadSome(char* destination, size_t count);

  std::string path_;
  int descriptor_ = -1;
  std::unique_ptr<ObjectPrefetcher> object_;  // for an s3:// object
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;  // the window in buffer_
  uint64_t position_ = 0;
  uint64_t file_size_ = UINT64_MAX;
  bool at_end_ = false;
};

}  // namespace keel

#endif  // KEEL_IO_INPUT_SPLIT_H_
