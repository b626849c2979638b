// MembershipLog: the cluster's membership as the scheduler sees it, one JSON
// line per change, for people and scripts: who joined or left, when and why,
// which backups were promoted, and each view that followed. Appends, so a
// scheduler started again goes on in the same file. Every line also goes to
// the job's timeline when there is one (io/timeline_writer.h), and the
// latest kRecentEvents stay in memory for the status page. Not synchronized:
// the scheduler writes and reads under its own lock.
#ifndef KEEL_SCHEDULER_MEMBERSHIP_LOG_H_
#define KEEL_SCHEDULER_MEMBERSHIP_LOG_H_

#include <deque>
#include <fstream>
#include <string>
#include <vector>

#include "io/timeline_writer.h"
#include "keel.pb.h"

namespace keel {

// Lines kept for Recent().
constexpr size_t kRecentEvents = 64;

class MembershipLog {
 public:
  // Appends to `path`; "" records nothing. Each line goes to `timeline` too
  // unless it is null (it must outlive this log). Throws Error naming the
  // path if it cannot be opened.
  explicit MembershipLog(const std::string& path, TimelineWriter* timeline = nullptr);

  // {"time": <Unix seconds>, "event": `event`, "role": ..., "rank": ..., "node": ...,
  // "address": ..., <fields>}. `fields` is more "key": value pairs, already JSON ("" for none).
  void Record(const std::string& event, const proto::NodeInfo& node, const std::string& fields);
  // {"time": ..., "event": "view", "epoch": ..., "servers": ..., "workers": ..., "ranges":
  // [[primary, backups...], ...]}.
  void RecordView(const proto::ClusterView& view);

  // The latest kRecentEvents lines, oldest first (kept whether or not a
  // path was given).
  std::vector<std::string> Recent() const { return {recent_.begin(), recent_.end()}; }

 private:
  void Write(const std::string& line);
  std::ofstream out_;
  TimelineWriter* timeline_;
  std::deque<std::string> recent_;
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_MEMBERSHIP_LOG_H_
