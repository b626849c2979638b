#include "scheduler/membership_log.h"

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/json.h"

namespace keel {

MembershipLog::MembershipLog(const std::string& path, TimelineWriter* timeline)
    : timeline_(timeline) {
  if (path.empty()) return;
  out_.open(path, std::ios::app);
  if (!out_)
    throw MakeError("--membership_log ", path, ": cannot open for appending: ", strerror(errno));
}

void MembershipLog::Write(const std::string& line) {
  if (out_.is_open()) out_ << line << std::endl;  // flushed: readable while the job runs
  if (timeline_) timeline_->RecordLine(line);
  recent_.push_back(line);
  if (recent_.size() > kRecentEvents) recent_.pop_front();
}

void MembershipLog::Record(const std::string& event, const proto::NodeInfo& node,
                           const std::string& fields) {
  std::string members =
      "\"role\": " + JsonQuote(node.role() == proto::SERVER ? "server" : "worker") +
      ", \"rank\": " + std::to_string(node.rank()) + ", \"node\": " + std::to_string(node.id()) +
      ", \"address\": " + JsonQuote(node.address());
  if (!fields.empty()) members += ", " + fields;
  Write(TimelineEventLine(event, members));
}

void MembershipLog::RecordView(const proto::ClusterView& view) {
  int servers = 0, workers = 0;
  for (const auto& node : view.nodes()) (node.role() == proto::SERVER ? servers : workers) += 1;
  std::string ranges;
  for (const auto& range : view.ranges()) {
    ranges += (ranges.empty() ? "[" : ", [") + std::to_string(range.server_rank());
    for (int backup : range.backups()) ranges += ", " + std::to_string(backup);
    ranges += "]";
  }
  Write(TimelineEventLine("view", "\"epoch\": " + std::to_string(view.epoch()) +
                                      ", \"servers\": " + std::to_string(servers) +
                                      ", \"workers\": " + std::to_string(workers) +
                                      ", \"ranges\": [" + ranges + "]"));
}

}  // namespace keel
