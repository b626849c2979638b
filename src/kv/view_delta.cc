#include "kv/view_delta.h"

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>

#include "kv/keys.h"

namespace keel {
namespace {

using google::protobuf::util::MessageDifferencer;

// Drops the workers' entries, keeping the others in their order.
void CutWorkerEntries(google::protobuf::RepeatedPtrField<proto::NodeInfo>* nodes) {
  int kept = 0;
  for (int i = 0; i < nodes->size(); ++i) {
    if (nodes->Get(i).role() == proto::WORKER) continue;
    if (i != kept) nodes->SwapElements(i, kept);
    ++kept;
  }
  nodes->DeleteSubrange(kept, nodes->size() - kept);
}

bool InIdOrder(const proto::ClusterView& view) {
  for (int i = 1; i < view.nodes_size(); ++i) {
    if (view.nodes(i - 1).id() >= view.nodes(i).id()) return false;
  }
  return true;
}

}  // namespace

bool DiffViews(const proto::ClusterView& base, const proto::ClusterView& next,
               proto::ViewDelta* delta) {
  if (!InIdOrder(base) || !InIdOrder(next)) return false;
  delta->Clear();
  delta->set_base_epoch(base.epoch());
  proto::ClusterView* fields = delta->mutable_fields();
  *fields = next;
  fields->clear_nodes();
  fields->clear_ranges();
  // Both lists in id order: one merge finds the added, changed and removed.
  int b = 0, n = 0;
  while (b < base.nodes_size() || n < next.nodes_size()) {
    if (n == next.nodes_size() ||
        (b < base.nodes_size() && base.nodes(b).id() < next.nodes(n).id())) {
      delta->add_removed_nodes(base.nodes(b++).id());
    } else if (b == base.nodes_size() || next.nodes(n).id() < base.nodes(b).id()) {
      *delta->add_upserted_nodes() = next.nodes(n++);
    } else {
      if (!MessageDifferencer::Equals(base.nodes(b), next.nodes(n))) {
        *delta->add_upserted_nodes() = next.nodes(n);
      }
      ++b;
      ++n;
    }
  }
  delta->set_num_ranges(static_cast<uint32_t>(next.ranges_size()));
  for (int i = 0; i < next.ranges_size(); ++i) {
    if (i < base.ranges_size() && MessageDifferencer::Equals(base.ranges(i), next.ranges(i))) {
      continue;
    }
    delta->add_changed_range_indexes(static_cast<uint32_t>(i));
    *delta->add_changed_ranges() = next.ranges(i);
  }
  return true;
}

bool ApplyViewDelta(const proto::ClusterView& base, const proto::ViewDelta& delta,
                    proto::ClusterView* next) {
  if (base.epoch() != delta.base_epoch() ||
      delta.changed_range_indexes_size() != delta.changed_ranges_size()) {
    return false;
  }
  for (uint32_t index : delta.changed_range_indexes()) {
    if (index >= delta.num_ranges()) return false;
  }
  *next = delta.fields();
  // The base's nodes less the removed, with the upserted merged in, in id
  // order (the upserted are in id order too).
  std::vector<int32_t> removed(delta.removed_nodes().begin(), delta.removed_nodes().end());
  std::sort(removed.begin(), removed.end());
  int u = 0;
  auto add_upserted_before = [&](int32_t id) {
    while (u < delta.upserted_nodes_size() && delta.upserted_nodes(u).id() < id) {
      *next->add_nodes() = delta.upserted_nodes(u++);
    }
  };
  for (const proto::NodeInfo& node : base.nodes()) {
    add_upserted_before(node.id());
    if (u < delta.upserted_nodes_size() && delta.upserted_nodes(u).id() == node.id()) {
      *next->add_nodes() = delta.upserted_nodes(u++);
      continue;
    }
    if (std::binary_search(removed.begin(), removed.end(), node.id())) continue;
    *next->add_nodes() = node;
  }
  while (u < delta.upserted_nodes_size()) *next->add_nodes() = delta.upserted_nodes(u++);
  const int ranges = static_cast<int>(delta.num_ranges());
  next->mutable_ranges()->Reserve(ranges);
  for (int i = 0; i < ranges; ++i) {
    *next->add_ranges() = i < base.ranges_size() ? base.ranges(i) : proto::KeyRange();
  }
  for (int k = 0; k < delta.changed_ranges_size(); ++k) {
    *next->mutable_ranges(static_cast<int>(delta.changed_range_indexes(k))) =
        delta.changed_ranges(k);
  }
  return true;
}

void CutWorkers(proto::ClusterView* view) {
  CutWorkerEntries(view->mutable_nodes());
  view->set_workers_omitted(true);
}

void LeaveOutEvenBegins(proto::ClusterView* view) {
  const size_t ranges = static_cast<size_t>(view->ranges_size());
  for (size_t i = 0; i < ranges; ++i) {
    if (view->ranges(static_cast<int>(i)).begin() != RangeMap::EvenBegin(i, ranges)) return;
  }
  for (proto::KeyRange& range : *view->mutable_ranges()) range.clear_begin();
  view->set_even_begins(true);
}

void FillEvenBegins(proto::ClusterView* view) {
  if (!view->even_begins()) return;
  const size_t ranges = static_cast<size_t>(view->ranges_size());
  for (size_t i = 0; i < ranges; ++i) {
    view->mutable_ranges(static_cast<int>(i))->set_begin(RangeMap::EvenBegin(i, ranges));
  }
  view->clear_even_begins();
}

void CutWorkers(proto::ViewDelta* delta) {
  CutWorkerEntries(delta->mutable_upserted_nodes());
  delta->mutable_fields()->set_workers_omitted(true);
}

}  // namespace keel
