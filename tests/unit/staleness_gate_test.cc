#include "kv/staleness_gate.h"

#include <gtest/gtest.h>

#include <limits>

namespace keel {
namespace {

TEST(StalenessGate, BulkSynchronousWaitsForTheSlowest) {
  StalenessGate gate(0);
  gate.Advance(1, 3);
  gate.Advance(2, 5);
  EXPECT_EQ(gate.MinClock(), 3);
  EXPECT_TRUE(gate.Admits(3));
  EXPECT_FALSE(gate.Admits(4));
  gate.Advance(1, 4);
  EXPECT_TRUE(gate.Admits(4));
}

TEST(StalenessGate, BoundedStalenessLetsAWorkerRunAhead) {
  StalenessGate gate(2);
  gate.Advance(1, 1);
  gate.Advance(2, 10);
  EXPECT_TRUE(gate.Admits(3));
  EXPECT_FALSE(gate.Admits(4));
}

TEST(StalenessGate, AsynchronousAdmitsEverything) {
  StalenessGate gate(StalenessGate::kAsynchronous);
  gate.Advance(1, 0);
  EXPECT_TRUE(gate.Admits(1000000));
}

TEST(StalenessGate, ClocksNeverGoBack) {
  StalenessGate gate(0);
  gate.Advance(1, 5);
  gate.Advance(1, 2);
  EXPECT_EQ(gate.MinClock(), 5);
}

TEST(StalenessGate, ALeavingWorkerStopsCountingAtOnce) {
  StalenessGate gate(0);
  gate.Advance(1, 1);
  gate.Advance(2, 7);
  EXPECT_FALSE(gate.Admits(7));
  gate.Remove(1);
  EXPECT_TRUE(gate.Admits(7));
  gate.Remove(2);
  EXPECT_EQ(gate.MinClock(), std::numeric_limits<int64_t>::max());
}

TEST(StalenessGate, AJoiningWorkerStartsAtTheCurrentMinimum) {
  StalenessGate gate(0);
  gate.Advance(1, 6);
  gate.Advance(2, 8);
  gate.Advance(3, 0);  // joins behind everyone: counted at 6
  EXPECT_EQ(gate.MinClock(), 6);
  EXPECT_TRUE(gate.Admits(6));
}

TEST(StalenessGate, ANewViewRemovesWorkersNotInIt) {
  StalenessGate gate(0);
  gate.Advance(1, 1);
  gate.Advance(2, 9);
  gate.RemoveMissing({2, 3});
  EXPECT_EQ(gate.workers(), 1u);
  EXPECT_TRUE(gate.Admits(9));
}

}  // namespace
}  // namespace keel
