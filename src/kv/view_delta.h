// View deltas: a cluster view as the change from the one before it.
//
// A view names every member and every key range, so sending it whole to
// each member costs O(members x (members + ranges)) bytes per change: at
// 10,000 members and 10^4 ranges about 7 GB for one member leaving. A delta
// names only what changed (a node removed: a few bytes), so the scheduler
// sends it to every member holding the view before (proto::ViewDelta), and
// the whole view to the others; a member whose view is not the delta's base
// asks for the whole view.
//
// Both functions expect the nodes listed in increasing id order, as the
// scheduler lists them; DiffViews refuses views that are not.
#ifndef KEEL_KV_VIEW_DELTA_H_
#define KEEL_KV_VIEW_DELTA_H_

#include "keel.pb.h"

namespace keel {

// The change from `base` to `next` into `delta`; false (nothing filled) if
// either view's nodes are not in increasing id order.
bool DiffViews(const proto::ClusterView& base, const proto::ClusterView& next,
               proto::ViewDelta* delta);

// `base` with `delta` applied, into `next`; false if `base` is not the
// delta's base (another epoch) or the delta names a range index it does not
// have. `next` may not be `base`.
bool ApplyViewDelta(const proto::ClusterView& base, const proto::ViewDelta& delta,
                    proto::ClusterView* next);

}  // namespace keel

#endif  // KEEL_KV_VIEW_DELTA_H_
