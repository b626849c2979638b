#include "scheduler/lost_ranges.h"

#include <algorithm>

namespace keel {

bool LostRanges::Lose(size_t range, int rank, uint64_t epoch, double since, int64_t pushes,
                      double report_age_s) {
  auto [found, inserted] =
      lost_.emplace(range, LostRange{range, rank, epoch, since, "", pushes, report_age_s});
  if (inserted) return true;
  LostRange& lost = found->second;
  if (lost.rebuilt_from.empty()) return false;
  const int losses = lost.losses + 1;
  lost = LostRange{range, rank, epoch, since, "", pushes, report_age_s};
  lost.losses = losses;
  return true;
}

void LostRanges::Rebuilt(size_t range, const std::string& from, int64_t pushes_lost) {
  auto found = lost_.find(range);
  if (found == lost_.end() || !found->second.rebuilt_from.empty()) return;
  found->second.rebuilt_from = from;
  found->second.pushes_lost = pushes_lost;
}

void LostRanges::Adopt(const proto::ClusterView& known) {
  for (int range = 0; range < known.ranges_size(); ++range) {
    const proto::KeyRange& known_range = known.ranges(range);
    // Marked lost; or not yet (the scheduler that declared it ended before
    // its view went out) but waiting alone for a server not in the view.
    const int rank = known_range.server_rank();
    const bool waiting =
        known_range.backups_size() == 0 &&
        std::none_of(known.nodes().begin(), known.nodes().end(), [&](const proto::NodeInfo& node) {
          return node.role() == proto::SERVER && node.rank() == rank;
        });
    if (!(known_range.lost() || waiting) || lost_.count(static_cast<size_t>(range))) continue;
    LostRange& lost = lost_[static_cast<size_t>(range)];
    lost.range = static_cast<size_t>(range);
    lost.rank = rank;
    lost.epoch = known.epoch();
    if (known_range.lost()) lost.rebuilt_from = "not known (before this scheduler started)";
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
