// LostRanges: the key ranges that lost every replica, as the scheduler
// declares them (the moment a range's last server leaves, not when someone
// notices wrong sums).
//
// A range is lost when the server leaving was the last one holding its rows
// (RangeChains::Departure::alone): whatever that server acknowledged and no
// checkpoint holds is gone. The declaration is sticky for the job: every
// later view marks the range (KeyRange.lost), a restarted scheduler learns it
// from the views its nodes bring back, and the job's end says so (with
// --replication >= 1, a distinct exit status unless --allow_data_loss).
//
// Not synchronized: the scheduler calls it under its lock.
#ifndef KEEL_SCHEDULER_LOST_RANGES_H_
#define KEEL_SCHEDULER_LOST_RANGES_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "keel.pb.h"

namespace keel {

struct LostRange {
  size_t range = 0;
  int rank = -1;         // the server rank that held it last (-1: not known)
  uint64_t epoch = 0;    // the view epoch in which it was lost
  double since = 0;      // WallSeconds() of the declaration (0: not known)
  // Where its rows came back from: "checkpoint <id>", "initial values",
  // "server R's copy" (a removed server's HeldCopy), or "" while it waits for
  // a server to take it.
  std::string rebuilt_from;
  // The pushes its rows reflected on that server at its last report
  // (RangePushes), and how long before the loss that report came; -1: no
  // report. Every acknowledged push among them that no checkpoint holds is
  // lost, and so are those it applied after the report.
  int64_t pushes = -1;
  double report_age_s = 0;
  // Times the range lost every replica in the job: a rebuilt range can be
  // lost again (the fields above are then the latest loss's).
  int losses = 1;
  // Rebuilt from a removed server's copy: the pushes `pushes` counted that
  // the copy lacks (a lower bound: more may have come after the report);
  // -1: not known (rebuilt otherwise, or no report).
  int64_t pushes_lost = -1;
};

class LostRanges {
 public:
  // Records that `range`'s last replica, server `rank`, left in view `epoch`
  // at wall time `since`. Returns false (and changes nothing) if the range
  // was declared lost and waits for its rebuild still: that is the same loss.
  // A range lost again after its rebuild is a new loss: its details replace
  // the earlier one's, `losses` counts it, and Lose returns true.
  bool Lose(size_t range, int rank, uint64_t epoch, double since, int64_t pushes = -1,
            double report_age_s = 0);
  // The range lost earlier came back from `from` (see LostRange), lacking
  // `pushes_lost` of the pushes its last holder reported (-1: not known).
  void Rebuilt(size_t range, const std::string& from, int64_t pushes_lost = -1);
  // Ranges marked lost in `known`, a view a node of an earlier scheduler run
  // brings, are lost here too (their details unknown); so is one that waits
  // alone for a server rank not in that view (its loss declared by a
  // scheduler that ended before the view marking it went out).
  void Adopt(const proto::ClusterView& known);
  // Marks every lost range of `view` (whose ranges are filled).
  void MarkView(proto::ClusterView* view) const;

  bool any() const { return !lost_.empty(); }
  bool Lost(size_t range) const { return lost_.count(range) > 0; }
  const std::map<size_t, LostRange>& ranges() const { return lost_; }

 private:
  std::map<size_t, LostRange> lost_;
};

// The ranges' indices, in their order.
std::vector<size_t> LostRangeIndices(const std::vector<LostRange>& ranges);

}  // namespace keel

#endif  // KEEL_SCHEDULER_LOST_RANGES_H_
