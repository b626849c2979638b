// Partitions (faults/partition.h): who may make them, and how the launcher finds
// a process's listening ports for its rules.
#include "faults/partition.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;

TEST(Partition, IsRefusedWithoutRootSayingWhyAndNamingTheItem) {
  const std::string error =
      ErrorOf([] { CheckPartitionsPossible(1000, "partition:server:0|worker:0@1s+1s"); });
  EXPECT_TRUE(Contains(error,
                       "--faults item 'partition:server:0|worker:0@1s+1s': a partition "
                       "needs root"))
      << error;
  EXPECT_TRUE(Contains(error, "iptables")) << error;
  EXPECT_TRUE(Contains(error, "uid 1000")) << error;
}

TEST(Partition, FindsTheTcpPortsAProcessListensOn) {
  int port = 0;
  const int listener = testing::ListenOnLoopback(1, &port);
  ASSERT_GE(listener, 0);
  const std::vector<int> ports = ListeningPorts(getpid());
  close(listener);
  EXPECT_NE(std::find(ports.begin(), ports.end(), port), ports.end()) << port;
}

TEST(Partition, AProcessCgroupIsItsNameWithDashes) {
  EXPECT_EQ(CgroupName("server 1"), "server-1");
  EXPECT_EQ(CgroupName("scheduler"), "scheduler");
}

}  // namespace
}  // namespace keel
