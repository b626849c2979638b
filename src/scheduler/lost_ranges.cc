#include "scheduler/lost_ranges.h"

namespace keel {

bool LostRanges::Lose(size_t range, int rank, uint64_t epoch, double since, int64_t pushes,
                      double report_age_s) {
  if (lost_.count(range)) return false;
  LostRange& lost = lost_[range];
  lost.range = range;
  lost.rank = rank;
  lost.epoch = epoch;
  lost.since = since;
  lost.pushes = pushes;
  lost.report_age_s = report_age_s;
  return true;
}

void LostRanges::Rebuilt(size_t range, const std::string& from) {
  auto found = lost_.find(range);
  if (found != lost_.end() && found->second.rebuilt_from.empty()) found->second.rebuilt_from = from;
}

void LostRanges::Adopt(const proto::ClusterView& known) {
  for (int range = 0; range < known.ranges_size(); ++range) {
    if (!known.ranges(range).lost() || lost_.count(static_cast<size_t>(range))) continue;
    LostRange& lost = lost_[static_cast<size_t>(range)];
    lost.range = static_cast<size_t>(range);
    lost.rebuilt_from = "not known (declared before this scheduler started)";
  }
}

void LostRanges::MarkView(proto::ClusterView* view) const {
  for (const auto& [range, lost] : lost_) {
    if (range < static_cast<size_t>(view->ranges_size())) {
      view->mutable_ranges(static_cast<int>(range))->set_lost(true);
    }
  }
}

std::vector<size_t> LostRangeIndices(const std::vector<LostRange>& ranges) {
  std::vector<size_t> indices;
  for (const LostRange& lost : ranges) indices.push_back(lost.range);
  return indices;
}

}  // namespace keel
