#include "kv/staleness_gate.h"

#include <gtest/gtest.h>

#include <limits>

namespace keel {
namespace {

// Weights (table 0) of key range 0, bias (table 1) of range 0, weights of range 1.
const GateSlot kSlot{0, 0};
const GateSlot kBias{0, 1};
const GateSlot kOtherRange{1, 0};

TEST(StalenessGate, BulkSynchronousWaitsForTheSlowest) {
  StalenessGate gate(0);
  gate.Advance(1, 3);
  gate.Advance(2, 5);
  EXPECT_EQ(gate.MinClock(kSlot), 3);
  EXPECT_TRUE(gate.Admits(kSlot, 3));
  EXPECT_FALSE(gate.Admits(kSlot, 4));
  gate.Advance(1, 4);
  EXPECT_TRUE(gate.Admits(kSlot, 4));
}

TEST(StalenessGate, BoundedStalenessLetsAWorkerRunAhead) {
  StalenessGate gate(2);
  gate.Advance(1, 1);
  gate.Advance(2, 10);
  EXPECT_TRUE(gate.Admits(kSlot, 3));
  EXPECT_FALSE(gate.Admits(kSlot, 4));
}

TEST(StalenessGate, AsynchronousAdmitsEverything) {
  StalenessGate gate(StalenessGate::kAsynchronous);
  gate.Advance(1, 0);
  EXPECT_TRUE(gate.Admits(kSlot, 1000000));
}

TEST(StalenessGate, ClocksNeverGoBack) {
  StalenessGate gate(0);
  gate.Advance(1, 5);
  gate.Advance(1, 2);
  EXPECT_EQ(gate.MinClock(kSlot), 5);
}

TEST(StalenessGate, ALeavingWorkerStopsCountingAtOnce) {
  StalenessGate gate(0);
  gate.Advance(1, 1);
  gate.Advance(2, 7);
  EXPECT_FALSE(gate.Admits(kSlot, 7));
  gate.Remove(1);
  EXPECT_TRUE(gate.Admits(kSlot, 7));
  gate.Remove(2);
  EXPECT_EQ(gate.MinClock(kSlot), std::numeric_limits<int64_t>::max());
}

TEST(StalenessGate, AJoiningWorkerStartsAtTheCurrentMinimum) {
  StalenessGate gate(0);
  gate.Advance(1, 6);
  gate.Advance(2, 8);
  gate.Advance(3, 0);  // joins behind everyone: counted at 6
  EXPECT_EQ(gate.MinClock(kSlot), 6);
  EXPECT_TRUE(gate.Admits(kSlot, 6));
}

TEST(StalenessGate, ANewViewRemovesWorkersNotInIt) {
  StalenessGate gate(0);
  gate.Advance(1, 1);
  gate.Advance(2, 9);
  gate.RemoveMissing({2, 3});
  EXPECT_EQ(gate.workers(), 1u);
  EXPECT_TRUE(gate.Admits(kSlot, 9));
}

TEST(StalenessGate, APushCountsItsClockInItsOwnSlotOnly) {
  StalenessGate gate(0);
  gate.Advance(1, 1);
  // One server holds both ranges: the push of range 0 arrives first.
  gate.AdvanceSlot(1, kSlot, 2, /*join=*/true);
  EXPECT_TRUE(gate.Admits(kSlot, 2));
  EXPECT_FALSE(gate.Admits(kOtherRange, 2));
  EXPECT_FALSE(gate.Admits(kBias, 2));
  gate.AdvanceSlot(1, kOtherRange, 2, /*join=*/true);
  EXPECT_TRUE(gate.Admits(kOtherRange, 2));
  EXPECT_FALSE(gate.Admits(kBias, 2));
}

TEST(StalenessGate, AnAnnouncementCountsOnlyWhereItsPushesDoNot) {
  StalenessGate gate(0);
  gate.Advance(1, 1);
  // Clock 2 announced while the pushes of range 1 and of the bias stamped 2
  // are unanswered (lost with their server, to be sent again).
  gate.Advance(1, 2, {kOtherRange, kBias});
  EXPECT_TRUE(gate.Admits(kSlot, 2));
  EXPECT_TRUE(gate.Admits({7, 0}, 2));  // a slot its minibatch did not push
  EXPECT_FALSE(gate.Admits(kOtherRange, 2));
  EXPECT_FALSE(gate.Admits(kBias, 2));
  gate.AdvanceSlot(1, kBias, 2, /*join=*/true);  // the bias sent again, applied
  EXPECT_TRUE(gate.Admits(kBias, 2));
  EXPECT_FALSE(gate.Admits(kOtherRange, 2));
  // The next announcement does not name range 1: its minibatch did not push
  // there, so the clock counts there too.
  gate.Advance(1, 3);
  EXPECT_TRUE(gate.Admits(kOtherRange, 3));
}

TEST(StalenessGate, APushAppliedBeforeItsAnnouncementKeepsItsClock) {
  StalenessGate gate(0);
  gate.Advance(1, 1);
  gate.AdvanceSlot(1, kSlot, 2, /*join=*/true);
  gate.Advance(1, 2, {kSlot});
  EXPECT_TRUE(gate.Admits(kSlot, 2));
  EXPECT_TRUE(gate.Admits(kOtherRange, 2));
  EXPECT_FALSE(gate.Admits(kSlot, 3));
}

TEST(StalenessGate, APushPassedDownDoesNotCountAWorkerNotCounted) {
  StalenessGate gate(0);
  gate.Advance(1, 5);
  gate.AdvanceSlot(2, kSlot, 1, /*join=*/false);  // worker 2 left: a late copy
  EXPECT_EQ(gate.workers(), 1u);
  EXPECT_TRUE(gate.Admits(kSlot, 5));
  gate.AdvanceSlot(2, kSlot, 3, /*join=*/true);  // its own push counts it
  EXPECT_EQ(gate.MinClock(kSlot), 5);            // at the current minimum
  EXPECT_FALSE(gate.Admits(kSlot, 6));
}

}  // namespace
}  // namespace keel
