#include "scheduler/membership_log.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "base/json.h"
#include "base/time.h"

namespace keel {
namespace {

std::string Now() {
  const double seconds = WallSeconds();
  char text[32];
  snprintf(text, sizeof(text), "%.3f", seconds);
  return text;
}

}  // namespace

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
  std::string line =
      "{\"time\": " + Now() + ", \"event\": " + JsonQuote(event) +
      ", \"role\": " + JsonQuote(node.role() == proto::SERVER ? "server" : "worker") +
      ", \"rank\": " + std::to_string(node.rank()) + ", \"node\": " + std::to_string(node.id()) +
      ", \"address\": " + JsonQuote(node.address());
  if (!fields.empty()) line += ", " + fields;
  Write(line + "}");
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
  Write("{\"time\": " + Now() + ", \"event\": \"view\", \"epoch\": " +
        std::to_string(view.epoch()) + ", \"servers\": " + std::to_string(servers) +
        ", \"workers\": " + std::to_string(workers) + ", \"ranges\": [" + ranges + "]}");
}

}  // namespace keel
