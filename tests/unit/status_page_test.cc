// The scheduler's status page: the JSON it refreshes from, the page that
// carries it, and both routes on a running scheduler.
#include "metrics/status_page.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/json_reader.h"
#include "browser.h"
#include "cluster_fixture.h"
#include "io/http_server.h"
#include "scrape.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;

const JsonValue& At(const JsonValue& object, const std::string& path) {
  const JsonValue* value = &object;
  size_t begin = 0;
  while (begin <= path.size()) {
    const size_t end = std::min(path.find('.', begin), path.size());
    const std::string name = path.substr(begin, end - begin);
    const JsonValue* next = value->Find(name);
    if (!next) throw MakeError("no member '", name, "' in ", path);
    value = next;
    begin = end + 1;
  }
  return *value;
}

// A cluster of one server and two workers, one range starting past 2^63, a
// join event, and worker 1's loss not finite.
SchedulerStatus SomeStatus() {
  SchedulerStatus status;
  status.epoch = 3;
  status.expected_servers = 1;
  status.expected_workers = 2;
  status.members.push_back({7, proto::SERVER, 0, "10.0.0.1:7000", 0.5, false, false, ""});
  status.members.push_back({8, proto::WORKER, 0, "10.0.0.2:7001", 0.25, false, true, ""});
  status.members.push_back({9, proto::WORKER, 1, "10.0.0.3:7002", 12, true, false, ""});
  status.ranges.push_back({0, 0, {}, {}});
  status.ranges.push_back({(uint64_t{1} << 63) + 5, 0, {1, 2}, {2}});
  status.checkpoint_uri = "s3://bucket/ckpt";
  status.last_checkpoint = "ckpt-000002-000000000";
  status.checkpoints.committed = 2;
  status.events.push_back(
      "{\"time\": 1764073000.125, \"event\": \"join\", \"role\": \"worker\", \"rank\": 1, "
      "\"node\": 9, \"address\": \"10.0.0.3:7002\"}");
  return status;
}

ProgressSnapshot SomeProgress() {
  ProgressSnapshot progress;
  progress.epochs = 10;
  progress.epoch = 2;
  progress.examples_per_second = 1500;
  WorkerProgress first, second;
  first.rank = 0;
  first.epoch = 2;
  first.examples = 40;
  first.loss = 0.5;
  first.last_update_wall = 1000;
  second.rank = 1;
  second.loss = std::numeric_limits<double>::quiet_NaN();
  progress.workers = {first, second};
  DecidedEpoch epoch;
  epoch.epoch = 1;
  epoch.metrics = {{"validation:binary_classification_accuracy", 0.7},
                   {"validation:roc_auc_score", 0.75},
                   {"train:objective_loss", 0.6}};
  progress.decided.push_back(epoch);
  return progress;
}

TEST(StatusJson, CarriesTheViewTheRangesTheProgressAndTheEvents) {
  const JsonValue json = ParseJson(StatusJson(SomeStatus(), SomeProgress(), 1001.5), "status json");
  EXPECT_EQ(At(json, "time").AsNumber(), 1001.5);
  EXPECT_EQ(At(json, "view.epoch").AsNumber(), 3);
  const auto& nodes = At(json, "view.nodes").AsArray();
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(At(nodes[0], "role").AsString(), "server");
  EXPECT_EQ(At(nodes[1], "address").AsString(), "10.0.0.2:7001");
  EXPECT_TRUE(At(nodes[1], "done").AsBool());
  EXPECT_TRUE(At(nodes[2], "silent").AsBool());
  const auto& ranges = At(json, "view.ranges").AsArray();
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(At(ranges[1], "begin").AsString(), "0x8000000000000005") << "64 bits, exactly";
  EXPECT_EQ(At(ranges[1], "backups").AsArray().size(), 2u);
  EXPECT_EQ(At(ranges[1], "copying").AsArray()[0].AsNumber(), 2);
  EXPECT_EQ(At(json, "checkpoints.last").AsString(), "ckpt-000002-000000000");
  EXPECT_EQ(At(json, "checkpoints.last_age_s").type(), JsonValue::Type::kNull)
      << "no commit time: no age";
  EXPECT_EQ(At(json, "progress.epochs").AsNumber(), 10);
  EXPECT_EQ(At(json, "progress.headline_metric").AsString(), "validation:roc_auc_score");
  const auto& workers = At(json, "progress.workers").AsArray();
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(At(workers[0], "age_s").AsNumber(), 1.5);
  EXPECT_EQ(At(workers[1], "loss").type(), JsonValue::Type::kNull) << "NaN is not JSON";
  EXPECT_EQ(At(workers[1], "age_s").type(), JsonValue::Type::kNull) << "no report yet";
  EXPECT_EQ(
      At(At(json, "progress.decided").AsArray()[0], "metrics.validation:roc_auc_score").AsNumber(),
      0.75);
  EXPECT_EQ(At(json, "progress.end").type(), JsonValue::Type::kNull);
  const auto& events = At(json, "events").AsArray();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(At(events[0], "event").AsString(), "join");
}

TEST(StatusJson, KeepsOnlyTheLatestDecidedEpochs) {
  ProgressSnapshot progress;
  for (int epoch = 1; epoch <= static_cast<int>(kStatusEpochs) + 10; ++epoch) {
    DecidedEpoch decided;
    decided.epoch = epoch;
    progress.decided.push_back(decided);
  }
  const JsonValue json = ParseJson(StatusJson(SchedulerStatus(), progress, 0), "status json");
  const auto& decided = At(json, "progress.decided").AsArray();
  ASSERT_EQ(decided.size(), kStatusEpochs);
  EXPECT_EQ(At(decided.front(), "epoch").AsNumber(), 11);
  EXPECT_EQ(At(decided.back(), "epoch").AsNumber(), kStatusEpochs + 10);
}

// 10^4 members, 4,096 ranges and 9,000 workers' progress: a page of each,
// the totals and the members counted over all of them.
TEST(StatusJson, CarriesAPageOfEachTableWithItsTotal) {
  SchedulerStatus status;
  for (int rank = 0; rank < 9000; ++rank) {
    status.members.push_back({rank + 1, proto::WORKER, rank, "10.0.0.1:1", 0.5,
                              rank % 100 == 0, false, ""});
  }
  for (int rank = 999; rank >= 0; --rank) {  // servers last, in reverse
    status.members.push_back(
        {rank + 20000, proto::SERVER, rank, "10.0.0.2:1", rank == 7 ? 9.0 : 0.1, false,
         false, ""});
  }
  for (uint64_t r = 0; r < 4096; ++r) status.ranges.push_back({r << 40, 0, {}, {}});
  ProgressSnapshot progress;
  for (int rank = 0; rank < 9000; ++rank) {
    WorkerProgress worker;
    worker.rank = rank;
    progress.workers.push_back(worker);
  }
  const JsonValue first = ParseJson(StatusJson(status, progress, 0), "status json");
  EXPECT_EQ(At(first, "view.nodes").AsArray().size(), kStatusPageRows);
  EXPECT_EQ(At(first, "view.nodes_total").AsNumber(), 10000);
  EXPECT_EQ(At(first, "view.nodes_from").AsNumber(), 0);
  EXPECT_EQ(At(At(first, "view.nodes").AsArray()[0], "role").AsString(), "server");
  EXPECT_EQ(At(At(first, "view.nodes").AsArray()[0], "rank").AsNumber(), 0) << "servers by rank";
  EXPECT_EQ(At(first, "view.members.servers").AsNumber(), 1000);
  EXPECT_EQ(At(first, "view.members.workers").AsNumber(), 9000);
  EXPECT_EQ(At(first, "view.members.silent").AsNumber(), 90);
  EXPECT_EQ(At(first, "view.members.oldest_heartbeat_age_s").AsNumber(), 9);
  EXPECT_EQ(At(first, "view.ranges").AsArray().size(), kStatusPageRows);
  EXPECT_EQ(At(first, "view.ranges_total").AsNumber(), 4096);
  EXPECT_EQ(At(first, "progress.workers").AsArray().size(), kStatusPageRows);
  EXPECT_EQ(At(first, "progress.workers_total").AsNumber(), 9000);

  StatusPaging paging;
  paging.nodes_from = 9900;
  paging.ranges_from = 4000;
  paging.ranges_max = 10;
  paging.workers_from = 20000;
  const JsonValue later = ParseJson(StatusJson(status, progress, 0, paging), "status json");
  const auto& nodes = At(later, "view.nodes").AsArray();
  ASSERT_EQ(nodes.size(), 100u);
  EXPECT_EQ(At(nodes[0], "role").AsString(), "worker");
  EXPECT_EQ(At(nodes[0], "rank").AsNumber(), 8900);
  EXPECT_EQ(At(later, "view.nodes_from").AsNumber(), 9900);
  const auto& ranges = At(later, "view.ranges").AsArray();
  ASSERT_EQ(ranges.size(), 10u);
  EXPECT_EQ(At(ranges[0], "begin").AsString(), "0x000fa00000000000");
  EXPECT_TRUE(At(later, "progress.workers").AsArray().empty()) << "past the end: none";
  EXPECT_EQ(At(later, "progress.workers_from").AsNumber(), 9000);
}

TEST(StatusPaging, IsReadFromTheQueryAndBadParametersAreNamed) {
  const StatusPaging paging = StatusPagingOf({{"nodes_from", "1000"}, {"ranges_max", "20"}});
  EXPECT_EQ(paging.nodes_from, 1000u);
  EXPECT_EQ(paging.nodes_max, kStatusPageRows);
  EXPECT_EQ(paging.ranges_max, 20u);
  const auto error = [](const std::multimap<std::string, std::string>& query) {
    try {
      StatusPagingOf(query);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error({{"nodes_max", "5001"}}), "nodes_max 5001 is above 5000");
  EXPECT_EQ(error({{"nodes_from", "-1"}}), "nodes_from '-1' is not a whole number");
  EXPECT_EQ(error({{"nodes_from", "99999999999999999999"}}),
            "nodes_from '99999999999999999999' is not a whole number");
  EXPECT_EQ(error({{"workers_from", ""}}), "workers_from '' is not a whole number");
  EXPECT_EQ(error({{"page", "2"}}), "unknown parameter 'page'");
}

// What a node sent cannot close the page's script element and run as markup.
TEST(StatusPage, EmbedsTheStateSoNoValueCanCloseItsScript) {
  SchedulerStatus status = SomeStatus();
  status.members[2].error = "</script><script>alert(1)</script>";
  const std::string json = StatusJson(status, SomeProgress(), 1001.5);
  const std::string page = StatusPage(json);
  EXPECT_EQ(testing::CountOf(page, "</script>"), 2u) << "the page's own two scripts only";
  const std::string open = "<script id=\"initial-status\" type=\"application/json\">";
  const size_t begin = page.find(open);
  ASSERT_NE(begin, std::string::npos);
  const size_t end = page.find("</script>", begin);
  const JsonValue embedded =
      ParseJson(page.substr(begin + open.size(), end - begin - open.size()), "embedded");
  EXPECT_EQ(At(At(embedded, "view.nodes").AsArray()[2], "error").AsString(),
            "</script><script>alert(1)</script>");
  // Nothing loaded from elsewhere: the one fetch is the scheduler's own JSON.
  for (const char* outside : {"src=", "href=", "<link", "@import", "url(", "https://"}) {
    EXPECT_FALSE(Contains(page, outside)) << outside;
  }
  EXPECT_EQ(testing::CountOf(page, "fetch("), 1u);
  EXPECT_TRUE(Contains(page, "fetch(\"status.json\""));
  EXPECT_FALSE(Contains(page, "innerHTML")) << "values go in as text";
}

TEST(StatusPage, ASchedulerServesThePageAndItsJson) {
  SchedulerOptions options = testing::LocalScheduler(2, 3);
  options.replication = 1;
  std::unique_ptr<Scheduler> scheduler = testing::StartScheduler(options);
  HttpServer http(HttpServerOptions{});
  RouteStatusPage(scheduler.get(), &http);
  http.Start();

  const auto page = testing::HttpGet(http.port(), "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_TRUE(Contains(page.body, "<title>Keel job status</title>"));
  const auto answer = testing::HttpGet(http.port(), "/status.json");
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(answer.content_type, "application/json");
  const JsonValue json = ParseJson(answer.body, "/status.json");
  EXPECT_EQ(At(json, "view.epoch").AsNumber(), 0) << "no node has registered";
  EXPECT_EQ(At(json, "view.expected_workers").AsNumber(), 3);
  EXPECT_EQ(At(json, "view.replication").AsNumber(), 1);
  EXPECT_TRUE(At(json, "view.ranges").AsArray().empty()) << "no view, no ranges";
  EXPECT_EQ(testing::HttpPost(http.port(), "/status.json", "{}").status, 405);
  // Paging from the query, on both routes; a bad parameter is named.
  EXPECT_EQ(testing::HttpGet(http.port(), "/status.json?nodes_from=10&ranges_max=5").status, 200);
  EXPECT_EQ(testing::HttpGet(http.port(), "/?workers_max=20").status, 200);
  const auto refused = testing::HttpGet(http.port(), "/status.json?nodes_max=99999");
  EXPECT_EQ(refused.status, 400);
  EXPECT_TRUE(Contains(refused.body, "nodes_max 99999 is above 5000")) << refused.body;
  EXPECT_EQ(testing::HttpGet(http.port(), "/?color=red").status, 400);
  http.Stop();
  scheduler->Stop();
}

}  // namespace
}  // namespace keel
