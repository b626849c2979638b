// TimelineWriter: one process's part of a job's timeline, JSON lines in the
// job's model folder (<model_dir>/timeline/<name>.jsonl), read back by
// `keel report` and the experiment scripts. The schema is in
// docs/ARCHITECTURE.md (Observability: the timeline).
//
// Every line is {"time": <Unix seconds>, "event": "...", ...}. Lines are
// buffered and written out by Flush, and by Record itself for the first line
// and once the last write is older than the flush interval (0 for a local folder: every line goes
// out at once; 30 s for an object store, which is written whole each time). So a crash loses at
// most the interval's lines. The model folder goes through Storage: a plain path is appended to; a
// storage URI's object (file://, s3://) is read back once when continuing, then rewritten whole.
//
// A failed write is logged (once per writer) and the lines kept for the next
// try, at most kMaxPendingLines of them: the timeline never stops a job.
// Safe for concurrent use without external synchronization.
#ifndef KEEL_IO_TIMELINE_WRITER_H_
#define KEEL_IO_TIMELINE_WRITER_H_

#include <mutex>
#include <string>

namespace keel {

class TimelineWriter {
 public:
  static constexpr size_t kMaxPendingLines = 100000;
  static constexpr double kObjectFlushIntervalS = 30;

  // Records into <model_dir>/timeline/<name>.jsonl; `model_dir` "" records
  // nothing. `fresh`: starts the file anew (a job started from scratch);
  // else goes on after what it holds (a resumed job, a restarted process).
  TimelineWriter(const std::string& model_dir, const std::string& name, bool fresh);
  // Flushes.
  ~TimelineWriter();
  TimelineWriter(const TimelineWriter&) = delete;
  TimelineWriter& operator=(const TimelineWriter&) = delete;

  bool enabled() const { return !model_dir_.empty(); }
  // "<model_dir>/timeline/<name>.jsonl", for messages.
  const std::string& location() const { return location_; }

  // Adds {"time": now, "event": `event`, <fields>}; `fields` are JSON
  // members without braces ("\"rank\": 2"), "" for none.
  void Record(const std::string& event, const std::string& fields);
  // Adds a line as given (a JSON object, no newline).
  void RecordLine(const std::string& line);
  // Writes out every buffered line.
  void Flush();

 private:
  void FlushLocked();
  void WriteFile();
  void WriteObject();

  const std::string model_dir_;
  const std::string key_;  // relative to model_dir
  std::string location_;
  bool object_ = false;  // a storage URI: rewritten whole
  double flush_interval_s_ = 0;
  std::mutex mutex_;
  bool truncate_ = false;  // a local file still to be started anew
  std::string written_;    // an object's lines so far
  std::string pending_;    // lines not yet written
  size_t pending_lines_ = 0;
  double last_flush_ = -1e18;  // monotonic seconds: the first line goes out at once
  bool warned_ = false;
};

// Unix seconds for a JSON line, to the millisecond ("1764073000.123").
std::string JsonUnixTime(double unix_seconds);

// A timeline event's line as of now: {"time": ..., "event": EVENT, FIELDS}
// (`fields`: members already JSON, "\"a\": 1, \"b\": 2", or "").
std::string TimelineEventLine(const std::string& event, const std::string& fields);

}  // namespace keel

#endif  // KEEL_IO_TIMELINE_WRITER_H_
