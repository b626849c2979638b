// A real Prometheus (Debian's /usr/bin/prometheus, on loopback, started and
// stopped by the test) scraping every role of a running `keel launch` job,
// and promtool's lint of every role's /metrics.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "base/json_reader.h"
#include "scrape.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::HttpGet;
using testing::KeelBinary;
using testing::SumOfValues;
using testing::WaitFor;

// The role -> metrics port table `keel launch` prints at start ("  worker 0
// http://127.0.0.1:PORT/metrics"), once every role of a cluster of `roles` is in it.
std::map<std::string, int> MetricsPorts(const std::string& output) {
  std::map<std::string, int> ports;
  static const std::regex kLine(
      R"(\n  ((?:scheduler|server \d+|worker \d+)) +http://127\.0\.0\.1:(\d+)/metrics)");
  for (std::sregex_iterator it(output.begin(), output.end(), kLine), end; it != end; ++it) {
    ports[(*it)[1]] = std::stoi((*it)[2]);
  }
  return ports;
}

// Prometheus's instant query answer for `query`: the value of each series
// (by its "instance" label), empty if none yet or no answer.
std::map<std::string, double> Query(int prometheus_port, const std::string& query) {
  std::map<std::string, double> values;
  const auto answer = HttpGet(prometheus_port, "/api/v1/query?query=" + query);
  if (answer.status != 200) return values;
  const JsonValue json = ParseJson(answer.body, "prometheus answer");
  const JsonValue* data = json.Find("data");
  const JsonValue* result = data ? data->Find("result") : nullptr;
  if (!result) return values;
  for (const JsonValue& series : result->AsArray()) {
    const JsonValue* metric = series.Find("metric");
    const JsonValue* instance = metric ? metric->Find("instance") : nullptr;
    const JsonValue* value = series.Find("value");
    if (!instance || !value || value->AsArray().size() != 2) continue;
    values[instance->AsString()] = std::stod(value->AsArray()[1].AsString());
  }
  return values;
}

class PrometheusScrape : public testing::TempFolderTest {
 protected:
  PrometheusScrape() : TempFolderTest("prometheus") {}

  // A small training job that runs until the test stops it (no validation
  // channel and no held-out rows, so no early stopping).
  pid_t LaunchJob() {
    const auto data = testing::Run({KeelBinary(), "datagen", "--model=linear", "--rows=20000",
                                    "--features=2000", "--nnz=10", "--out=" + folder_ + "/data"},
                                   60);
    EXPECT_EQ(data.code, 0) << data.output;
    return processes_.Start(
        {KeelBinary(), "launch", "--servers=1", "--workers=1", "--job=linear_learner",
         "--predictor_type=binary_classifier", "--mini_batch_size=100", "--epochs=100000", "--holdout=0",
         "--train=" + folder_ + "/data/train", "--model_dir=" + folder_ + "/model"});
  }

  // Starts Prometheus on a free loopback port, scraping `targets` every second.
  pid_t StartPrometheus(const std::vector<int>& targets, int port) {
    std::string list;
    for (int target : targets) {
      list += (list.empty() ? "'127.0.0.1:" : ", '127.0.0.1:") + std::to_string(target) + "'";
    }
    const std::string config = WriteFile("prometheus.yml",
                                         "global:\n"
                                         "  scrape_interval: 1s\n"
                                         "  evaluation_interval: 1s\n"
                                         "scrape_configs:\n"
                                         "  - job_name: keel\n"
                                         "    static_configs:\n"
                                         "      - targets: [" +
                                             list + "]\n");
    return processes_.Start({"/usr/bin/prometheus", "--config.file=" + config,
                             "--storage.tsdb.path=" + folder_ + "/tsdb",
                             "--web.listen-address=127.0.0.1:" + std::to_string(port),
                             "--log.level=warn"});
  }

  // Launches the job (its PID in *launcher) and reads the three roles'
  // metrics ports from the launcher's table; false (with its output) if they
  // are not there in 30 s.
  ::testing::AssertionResult LaunchJobAndReadPorts(pid_t* launcher,
                                                   std::map<std::string, int>* ports) {
    *launcher = LaunchJob();
    if (WaitFor(
            [&] {
              *ports = MetricsPorts(processes_.Output(*launcher));
              return ports->size() == 3;
            },
            30)) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << processes_.Output(*launcher);
  }

  testing::Processes processes_;
};

TEST_F(PrometheusScrape, PrometheusScrapesEveryRoleAndSeesTheJobsCountersGrow) {
  ASSERT_FALSE(testing::SystemTool("prometheus").empty()) << "prometheus is not installed";
  pid_t launcher = 0;
  std::map<std::string, int> ports;
  ASSERT_TRUE(LaunchJobAndReadPorts(&launcher, &ports));
  // Every role is ready once the worker trains.
  for (const auto& [role, port] : ports) {
    EXPECT_TRUE(WaitFor([&, port = port] { return HttpGet(port, "/readyz").status == 200; }, 30))
        << role << ": " << HttpGet(port, "/readyz").body;
    EXPECT_EQ(HttpGet(port, "/healthz").body, "ok\n") << role;
  }
  const int prometheus_port = testing::UnusedPort();
  const pid_t prometheus =
      StartPrometheus({ports["scheduler"], ports["server 0"], ports["worker 0"]}, prometheus_port);
  ASSERT_TRUE(WaitFor([&] { return HttpGet(prometheus_port, "/-/ready").status == 200; }, 60))
      << processes_.Output(prometheus);
  // Every role scraped and up.
  EXPECT_TRUE(WaitFor([&] { return SumOfValues(Query(prometheus_port, "up")) == 3; }, 30))
      << processes_.Output(prometheus);
  // Two samples of the worker's examples and the server's served requests,
  // the later above the earlier.
  double examples = 0, served = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        examples = SumOfValues(Query(prometheus_port, "keel_worker_examples_total"));
        served = SumOfValues(Query(prometheus_port, "keel_server_served_requests_total"));
        return examples > 0 && served > 0;
      },
      30));
  double later_examples = 0, later_served = 0;
  EXPECT_TRUE(WaitFor(
      [&] {
        later_examples = SumOfValues(Query(prometheus_port, "keel_worker_examples_total"));
        later_served = SumOfValues(Query(prometheus_port, "keel_server_served_requests_total"));
        return later_examples > examples && later_served > served;
      },
      30))
      << "examples " << examples << " then " << later_examples << ", served " << served << " then "
      << later_served;
  kill(prometheus, SIGTERM);
  EXPECT_TRUE(processes_.Wait(prometheus, 30).finished);
  kill(launcher, SIGINT);
  const auto exit = processes_.Wait(launcher, 30);
  EXPECT_TRUE(exit.finished);
}

TEST_F(PrometheusScrape, PromtoolFindsNothingToLintInAnyRolesMetrics) {
  const std::string promtool = testing::SystemTool("promtool");
  ASSERT_FALSE(promtool.empty()) << "promtool is not installed";
  pid_t launcher = 0;
  std::map<std::string, int> ports;
  ASSERT_TRUE(LaunchJobAndReadPorts(&launcher, &ports));
  for (const auto& [role, port] : ports) {
    // Scraped once training has started, so every series (requests, tables) is there.
    std::string text;
    ASSERT_TRUE(WaitFor(
        [&, port = port, role = role] {
          const auto answer = HttpGet(port, "/metrics");
          text = answer.body;
          return answer.status == 200 && (role == "scheduler" || Contains(text, "op=\"push\""));
        },
        30))
        << role << ":\n"
        << text;
    EXPECT_EQ(HttpGet(port, "/metrics").content_type, "text/plain; version=0.0.4; charset=utf-8");
    const std::string file = WriteFile("metrics.txt", text);
    const auto lint = testing::Shell(promtool + " check metrics < " + file + " 2>&1");
    EXPECT_TRUE(lint.finished);
    EXPECT_EQ(lint.code, 0) << role << ":\n" << lint.output;
    EXPECT_EQ(lint.output, "") << role;
  }
  kill(launcher, SIGINT);
  EXPECT_TRUE(processes_.Wait(launcher, 30).finished);
}

}  // namespace
}  // namespace keel
