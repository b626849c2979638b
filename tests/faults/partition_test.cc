// Partitions (faults/partition.h): who may make them, and how the launcher finds
// a process's listening ports for its rules.
#include "faults/partition.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
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
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
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
