// MembershipLog: the cluster's membership as the scheduler sees it, one JSON
// line per change, for people and scripts: who joined or left, when and why,
// which backups were promoted, and each view that followed. Appends, so a
// scheduler started again goes on in the same file. Every line also goes to
// the job's timeline when there is one (io/timeline_writer.h). Not
// synchronized: the scheduler writes under its own lock.
#ifndef KEEL_SCHEDULER_MEMBERSHIP_LOG_H_
#define KEEL_SCHEDULER_MEMBERSHIP_LOG_H_

#include <fstream>
#include <string>

#include "io/timeline_writer.h"
#include "keel.pb.h"

namespace keel {

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

 private:
  void Write(const std::string& line);
  std::ofstream out_;
  TimelineWriter* timeline_;
};

}  // namespace keel

#endif  // KEEL_SCHEDULER_MEMBERSHIP_LOG_H_
