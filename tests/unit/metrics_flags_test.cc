// The metrics flags (cli/metrics_flags.h): --metrics_port and --metrics_bind
// as every role checks them, and `keel launch --metrics`.
#include "cli/metrics_flags.h"

#include <arpa/inet.h>
#include <gflags/gflags.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <sstream>
#include <string>

#include "launch/ports.h"
#include "metrics/metrics_endpoint.h"
#include "metrics/metrics_registry.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::ErrorOf;

class MetricsFlags : public ::testing::Test {
 protected:
  static void Set(const char* flag, const std::string& value) {
    ASSERT_FALSE(gflags::SetCommandLineOption(flag, value.c_str()).empty()) << flag;
  }

 private:
  gflags::FlagSaver saver_;
};

// A port another process holds: a role fails naming it, or with
// --metrics_port_fallback (what keel launch gives its picks) serves on
// another port.
TEST_F(MetricsFlags, ATakenPortFailsTheRoleUnlessItMayFallBack) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int taken = ntohs(address.sin_port);
  MetricsRegistry registry;
  const Probe ok = [] { return std::string(); };
  Set("metrics_port", std::to_string(taken));
  const std::string error = ErrorOf([&] { StartMetricsEndpoint("worker 0", &registry, ok, ok); });
  EXPECT_NE(error.find("--metrics_port"), std::string::npos) << error;
  EXPECT_NE(error.find(std::to_string(taken)), std::string::npos) << error;
  Set("metrics_port_fallback", "true");
  const auto endpoint = StartMetricsEndpoint("worker 0", &registry, ok, ok);
  ASSERT_NE(endpoint, nullptr);
  EXPECT_GT(endpoint->port(), 0);
  EXPECT_NE(endpoint->port(), taken);
  endpoint->Stop();
  close(fd);
}

TEST_F(MetricsFlags, ByDefaultARoleServesNoMetrics) {
  EXPECT_EQ(ErrorOf([] { CheckMetricsFlags(); }), "no error");
  EXPECT_FALSE(MetricsHttpFromFlags().has_value());
}

TEST_F(MetricsFlags, APortListensOnLoopbackUnlessMetricsBindSaysOtherwise) {
  Set("metrics_port", "9400");
  auto http = MetricsHttpFromFlags();
  ASSERT_TRUE(http.has_value());
  EXPECT_EQ(http->host, "127.0.0.1");
  EXPECT_EQ(http->port, 9400);
  Set("metrics_bind", "0.0.0.0");
  EXPECT_EQ(MetricsHttpFromFlags()->host, "0.0.0.0");
  Set("metrics_bind", "::1");
  EXPECT_EQ(MetricsHttpFromFlags()->host, "::1");
}

TEST_F(MetricsFlags, APortOutOfRangeIsRefused) {
  Set("metrics_port", "70000");
  EXPECT_EQ(ErrorOf([] { CheckMetricsFlags(); }),
            "--metrics_port 70000 is not in [0, 65535]: 0 turns metrics off");
  Set("metrics_port", "-1");
  EXPECT_EQ(ErrorOf([] { CheckMetricsFlags(); }),
            "--metrics_port -1 is not in [0, 65535]: 0 turns metrics off");
}

TEST_F(MetricsFlags, ABindThatIsNotAnAddressIsRefused) {
  for (const char* bind : {"localhost", "127.0.0", "", "1.2.3.4:80"}) {
    Set("metrics_bind", bind);
    EXPECT_EQ(ErrorOf([] { CheckMetricsFlags(); }),
              "--metrics_bind '" + std::string(bind) +
                  "' is not an IPv4 or IPv6 address (127.0.0.1, 0.0.0.0, ::1)");
  }
}

TEST_F(MetricsFlags, LaunchMetricsIsAutoByDefaultOrOff) {
  EXPECT_TRUE(LaunchMetricsOn({"--job=linear_learner"}));
  Set("metrics", "off");
  EXPECT_FALSE(LaunchMetricsOn({}));
  Set("metrics", "on");
  EXPECT_EQ(ErrorOf([] { LaunchMetricsOn({}); }), "--metrics 'on' is not auto or off");
}

TEST_F(MetricsFlags, LaunchRefusesOneMetricsPortForEveryRole) {
  EXPECT_EQ(ErrorOf([] { LaunchMetricsOn({"--metrics_port=9400"}); }),
            "keel launch gives each role its own metrics port: use --metrics=auto (the default) "
            "or --metrics=off, not --metrics_port");
}

TEST_F(MetricsFlags, FreeLocalPortsAreDistinct) {
  const std::vector<int> ports = FreeLocalPorts(8);
  ASSERT_EQ(ports.size(), 8u);
  EXPECT_EQ(std::set<int>(ports.begin(), ports.end()).size(), 8u);
  // Below the ephemeral range, where no socket binding port 0 (as every
  // role's transport does) can take them before the roles bind them.
  const int ephemeral = EphemeralPortRange().first;
  if (ephemeral < 11000) {
    GTEST_SKIP() << "this machine's ephemeral ports start at " << ephemeral
                 << ": no room below them, so the ports come from anywhere";
  }
  for (int port : ports) {
    EXPECT_GE(port, 10000);
    EXPECT_LT(port, ephemeral);
  }
}

// The --metrics_port flag in `argv`, or "" if none.
std::string MetricsPortFlag(const std::vector<std::string>& argv) {
  std::string found;
  for (const std::string& arg : argv) {
    if (arg.rfind("--metrics_port=", 0) == 0) found = arg;
  }
  return found;
}

TEST_F(MetricsFlags, LaunchGivesEveryRoleItsOwnPortAndPrintsWhereToScrapeIt) {
  const LaunchMetricsPorts ports(/*on=*/true, /*with_scheduler=*/true, 2, 1, "127.0.0.1");
  std::set<std::string> flags;
  for (const char* role : {"scheduler", "server 0", "server 1", "worker 0"}) {
    std::vector<std::string> argv = {"keel", "server"};
    ports.AddFlag(role, &argv);
    ASSERT_EQ(argv.size(), 4u) << role;
    flags.insert(argv[2]);
    EXPECT_EQ(argv[3], "--metrics_port_fallback") << role;  // its pick may be taken by then
  }
  EXPECT_EQ(flags.size(), 4u);
  std::ostringstream printed;
  ports.Print(printed);
  const std::string text = printed.str();
  EXPECT_EQ(text.rfind("metrics (Prometheus; /healthz and /readyz beside them):\n", 0), 0u);
  std::vector<std::string> argv;
  ports.AddFlag("worker 0", &argv);
  const std::string port = MetricsPortFlag(argv).substr(std::string("--metrics_port=").size());
  EXPECT_TRUE(testing::Contains(text, "\n  worker 0   http://127.0.0.1:" + port + "/metrics\n"))
      << text;
}

TEST_F(MetricsFlags, LaunchWithMetricsOffAddsNoFlagAndPrintsNothing) {
  const LaunchMetricsPorts ports(/*on=*/false, /*with_scheduler=*/true, 2, 1, "127.0.0.1");
  std::vector<std::string> argv = {"keel", "worker"};
  ports.AddFlag("worker 0", &argv);
  EXPECT_EQ(MetricsPortFlag(argv), "");
  std::ostringstream printed;
  ports.Print(printed);
  EXPECT_EQ(printed.str(), "");
}

}  // namespace
}  // namespace keel
