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

// The workers' form of a view: every worker's entry cut to its role, id and
// rank. A worker sends only to servers and the scheduler and takes data
// messages only from servers, so no worker's address or route digest is of
// use to it; those are most of a node's bytes (about 55 of 65), and every
// member gets the first view whole: at 10,000 members, 9,000 of them
// workers, the cut halves the bytes of the first view. Servers get views
// whole (they check the workers' route digests).
void CutWorkers(proto::ClusterView* view);
// The same cut of a delta's nodes: a delta between two whole views, cut,
// applied to the first view's cut form gives the second's.
void CutWorkers(proto::ViewDelta* delta);

}  // namespace keel

#endif  // KEEL_KV_VIEW_DELTA_H_
