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

// The workers' form of a view: no worker listed (`workers_omitted`; its
// `num_workers` says how many). A worker sends only to servers and the
// scheduler, takes data messages only from servers, and reads of the other
// workers only their number, and every member gets the first view whole:
// at 10,000 members, 9,000 of them workers, listing them costs each worker
// about 110 KB and 9,000 entries to parse. Servers get views whole (they
// check the workers' route digests). A worker's own entry is in the answer
// to its REGISTER; a restarted scheduler checks a rejoining worker's rank
// against the view's `num_workers` instead of its listing.
void CutWorkers(proto::ClusterView* view);
// The same cut of a delta: its upserted workers dropped (a removed worker's
// id stays; nothing in the workers' form has it). A delta between two whole
// views, cut, applied to the first view's workers' form gives the second's.
void CutWorkers(proto::ViewDelta* delta);

// A whole view as sent: every range's `begin` left out (`even_begins`) when
// they are the even split, which they are in every view a job makes (the
// ranges never change, only their servers). 10 of a range's 17 bytes.
void LeaveOutEvenBegins(proto::ClusterView* view);
// A view as received, made whole again: the begins of one with
// `even_begins` filled in (and the flag cleared); any other is left as is.
void FillEvenBegins(proto::ClusterView* view);

}  // namespace keel

#endif  // KEEL_KV_VIEW_DELTA_H_
