#include "io/timeline_writer.h"

#include <glog/logging.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "base/error.h"
#include "base/files.h"
#include "base/json.h"
#include "base/time.h"
#include "io/storage.h"

namespace keel {

std::string JsonUnixTime(double unix_seconds) {
  char text[32];
  snprintf(text, sizeof(text), "%.3f", unix_seconds);
  return text;
}

TimelineWriter::TimelineWriter(const std::string& model_dir, const std::string& name, bool fresh)
    : model_dir_(model_dir), key_("timeline/" + name + ".jsonl") {
  if (model_dir_.empty()) return;
  location_ = model_dir_ + "/" + key_;
  object_ = IsStorageUri(model_dir_);
  flush_interval_s_ = object_ ? kObjectFlushIntervalS : 0;
  truncate_ = fresh;
  if (!object_ || fresh) return;
  try {
    written_ = OpenStorage(model_dir_)->Get(key_);
  } catch (const NotFoundError&) {
  } catch (const std::exception& e) {
    LOG(WARNING) << "timeline " << location_ << ": cannot read it to go on: " << e.what()
                 << " (starting it anew)";
  }
}

TimelineWriter::~TimelineWriter() { Flush(); }

std::string TimelineEventLine(const std::string& event, const std::string& fields) {
  std::string line =
      "{\"time\": " + JsonUnixTime(WallSeconds()) + ", \"event\": " + JsonQuote(event);
  if (!fields.empty()) line += ", " + fields;
  return line + "}";
}

void TimelineWriter::Record(const std::string& event, const std::string& fields) {
  if (!enabled()) return;
  RecordLine(TimelineEventLine(event, fields));
}

void TimelineWriter::RecordLine(const std::string& line) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (pending_lines_ >= kMaxPendingLines) return;  // writes keep failing: bounded
  pending_ += line;
  pending_ += '\n';
  ++pending_lines_;
  if (MonotonicSeconds() - last_flush_ >= flush_interval_s_) FlushLocked();
}

void TimelineWriter::Flush() {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  FlushLocked();
}

void TimelineWriter::FlushLocked() {
  last_flush_ = MonotonicSeconds();
  if (pending_.empty() && !truncate_) return;
  try {
    object_ ? WriteObject() : WriteFile();
    pending_.clear();
    pending_lines_ = 0;
  } catch (const std::exception& e) {
    if (!warned_) LOG(WARNING) << "timeline " << location_ << ": " << e.what();
    warned_ = true;
  }
}

void TimelineWriter::WriteFile() {
  MakeDirectories(model_dir_ + "/timeline");
  std::ofstream out(location_, truncate_ ? std::ios::trunc : std::ios::app);
  out << pending_;
  out.flush();
  if (!out) throw MakeError("cannot write ", location_);
  truncate_ = false;
}

void TimelineWriter::WriteObject() {
  const std::string whole = written_ + pending_;
  OpenStorage(model_dir_)->Put(key_, whole);
  written_ = whole;
  truncate_ = false;
}

}  // namespace keel
