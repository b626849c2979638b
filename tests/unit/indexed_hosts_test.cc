// The hosts of a `keel train` job given as flags (a Kubernetes Indexed Job)
// instead of resourceconfig.json: the list and its ranges, this host by name
// or by JOB_COMPLETION_INDEX, the leader at index 0 in both forms, and the
// contract refusing both sources at once or neither.
#include "launch/indexed_hosts.h"

#include <gtest/gtest.h>

#include "base/files.h"
#include "base/time.h"
#include "launch/sagemaker_train.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;

std::vector<std::string> Names(const std::string& list) { return ExpandHostNames(list, "--hosts"); }

TEST(HostNames, AListKeepsItsOrder) {
  EXPECT_EQ(Names("b.svc,a.svc,c.svc"), (std::vector<std::string>{"b.svc", "a.svc", "c.svc"}));
}

TEST(HostNames, ARangeExpandsInIncreasingOrderWithoutPadding) {
  EXPECT_EQ(Names("keel-train-{0..2}.keel-train"),
            (std::vector<std::string>{"keel-train-0.keel-train", "keel-train-1.keel-train",
                                      "keel-train-2.keel-train"}));
  const std::vector<std::string> twelve = Names("keel-train-{0..11}.keel-train");
  ASSERT_EQ(twelve.size(), 12u);
  EXPECT_EQ(twelve[2], "keel-train-2.keel-train");
  EXPECT_EQ(twelve[10], "keel-train-10.keel-train");
  EXPECT_EQ(Names("head,w{1..2}"), (std::vector<std::string>{"head", "w1", "w2"}));
  EXPECT_EQ(Names("n{7..7}"), std::vector<std::string>{"n7"});
}

TEST(HostNames, NameWhatIsWrong) {
  EXPECT_EQ(ErrorOf([] { Names("a,,b"); }), "--hosts: an empty host name");
  EXPECT_EQ(ErrorOf([] { Names("a,"); }), "--hosts: an empty host name");
  EXPECT_EQ(ErrorOf([] { Names("k-{2..0}"); }), "--hosts: 'k-{2..0}': the range runs backwards");
  for (const char* bad : {"k-{0-2}", "k-{a..b}", "k-{0..2", "k-{0..1}-{0..1}", "k-{..2}"}) {
    EXPECT_EQ(
        ErrorOf([&] { Names(bad); }),
        std::string("--hosts: '") + bad + "': a range is one {FIRST..LAST} of decimal numbers")
        << bad;
  }
  EXPECT_EQ(ErrorOf([] { Names("k-}"); }), "--hosts: 'k-}': a '}' without its '{'");
  EXPECT_EQ(ErrorOf([] { Names("k-{0..99999999}"); }), "--hosts: more than 10000 hosts");
}

TEST(IndexedHosts, TheIndexNamesThisHostAndIndexZeroLeads) {
  const std::vector<std::string> names = Names("keel-train-{0..11}.keel-train");
  const SageMakerHosts tenth = IndexedHosts(names, "", "10");
  EXPECT_EQ(tenth.current_host, "keel-train-10.keel-train");
  EXPECT_EQ(tenth.CurrentIndex(), 10);
  EXPECT_EQ(tenth.Leader(), "keel-train-0.keel-train");
  EXPECT_FALSE(tenth.Leads());
  EXPECT_TRUE(IndexedHosts(names, "", "0").Leads());
  EXPECT_EQ(tenth.hosts, names);  // not sorted: keel-train-10 stays after keel-train-9
}

TEST(IndexedHosts, CurrentHostComesBeforeTheIndex) {
  const SageMakerHosts hosts = IndexedHosts({"a", "b", "c"}, "c", "0");
  EXPECT_EQ(hosts.current_host, "c");
  EXPECT_EQ(hosts.CurrentIndex(), 2);
}

TEST(IndexedHosts, NameWhatIsWrong) {
  EXPECT_EQ(ErrorOf([] { IndexedHosts({"a", "b", "a"}, "", "0"); }), "--hosts names a twice");
  EXPECT_EQ(ErrorOf([] {
              IndexedHosts({"a", "b"}, "c", "");
            }),
            "--current_host c is not among --hosts");
  EXPECT_EQ(ErrorOf([] {
              IndexedHosts({"a", "b"}, "", "2");
            }),
            "JOB_COMPLETION_INDEX '2' is not an index of --hosts' 2 host(s) (0 to 1)");
  EXPECT_EQ(ErrorOf([] {
              IndexedHosts({"a", "b"}, "", "-1");
            }),
            "JOB_COMPLETION_INDEX '-1' is not an index of --hosts' 2 host(s) (0 to 1)");
  EXPECT_EQ(ErrorOf([] {
              IndexedHosts({"a", "b"}, "", "one");
            }),
            "JOB_COMPLETION_INDEX 'one' is not an index of --hosts' 2 host(s) (0 to 1)");
  EXPECT_TRUE(Contains(ErrorOf([] {
                         IndexedHosts({"a", "b"}, "", "");
                       }),
                       "--hosts needs --current_host or JOB_COMPLETION_INDEX"));
  EXPECT_EQ(ErrorOf([] { IndexedHosts({}, "", "0"); }), "--hosts names no host");
}

TEST(IndexedHosts, RanksFollowTheIndexNotTheNamesOrder) {
  // Sorted by name, keel-train-10 would come third and take ranks 2; by index it is 10.
  const SageMakerHosts hosts = IndexedHosts(Names("keel-train-{0..11}.keel-train"), "", "10");
  const SageMakerHostPlan plan = PlanSageMakerHost(hosts, 1, 2, 9800, {});
  EXPECT_FALSE(plan.leads);
  EXPECT_EQ(plan.scheduler, "keel-train-0.keel-train:9800");
  EXPECT_EQ(plan.first_server, 10);
  EXPECT_EQ(plan.first_worker, 20);
  EXPECT_EQ(plan.workers, 24);
  ASSERT_EQ(plan.others.size(), 11u);
  EXPECT_TRUE(plan.others[0].leader);
  EXPECT_EQ(plan.others[0].name, "keel-train-0.keel-train");
}

TEST(SageMakerLeader, SageMakersAlgoHostsStillSortByNameWithTenOrMore) {
  // resourceconfig.json as before: sorted by name, algo-1 leads, algo-10 is index 1.
  std::string hosts;
  for (int host = 12; host >= 1; --host) {
    hosts += std::string(hosts.empty() ? "" : ", ") + "\"algo-" + std::to_string(host) + "\"";
  }
  const SageMakerHosts parsed = ParseResourceConfig(
      R"({"current_host": "algo-10", "hosts": [)" + hosts + "]}", "resourceconfig.json");
  EXPECT_EQ(parsed.Leader(), "algo-1");
  EXPECT_EQ(parsed.CurrentIndex(), 1);
}

TEST(LeaderName, AResolvingNameIsAwaitedNoFurther) {
  SageMakerHostPlan plan;
  plan.scheduler = "localhost:9800";
  const double start = MonotonicSeconds();
  AwaitLeaderName(plan, 30);
  EXPECT_LT(MonotonicSeconds() - start, 5);
}

TEST(LeaderName, ANameThatNeverResolvesFailsNamingItAfterTheTimeout) {
  SageMakerHostPlan plan;
  plan.scheduler = "keel-train-0.keel-no-such-service.invalid:9800";
  const double start = MonotonicSeconds();
  EXPECT_EQ(ErrorOf([&] { AwaitLeaderName(plan, 1.5); }),
            "the leader's name keel-train-0.keel-no-such-service.invalid did not resolve within "
            "1.5 s (--leader_resolve_timeout)");
  EXPECT_GE(MonotonicSeconds() - start, 1.5);
}

class GivenHostsContract : public testing::TempFolderTest {
 protected:
  void SetUp() override {
    MakeDirectories(folder_ + "/input/config");
    testing::WriteFile(folder_ + "/input/config/hyperparameters.json", R"({"epochs": "2"})");
    testing::WriteFile(folder_ + "/input/config/inputdataconfig.json",
                       R"({"train": {"ContentType": "text/libsvm"}})");
  }
  const SageMakerHosts given_ = IndexedHosts({"k-0.k", "k-1.k"}, "", "1");
};

TEST_F(GivenHostsContract, StandInForAMissingResourceConfig) {
  const SageMakerContract contract = ReadSageMakerContract(folder_, &given_);
  EXPECT_EQ(contract.hosts.current_host, "k-1.k");
  EXPECT_EQ(contract.hosts.Leader(), "k-0.k");
  ASSERT_NE(contract.Channel("train"), nullptr);
}

TEST_F(GivenHostsContract, AndAResourceConfigTooAreRefused) {
  testing::WriteFile(folder_ + "/input/config/resourceconfig.json",
                     R"({"current_host": "algo-1", "hosts": ["algo-1"]})");
  EXPECT_TRUE(Contains(ErrorOf([&] { ReadSageMakerContract(folder_, &given_); }),
                       "resourceconfig.json and --hosts give the hosts: give one"));
}

TEST_F(GivenHostsContract, NeitherIsRefusedSayingWhatToGive) {
  const std::string error = ErrorOf([&] { ReadSageMakerContract(folder_); });
  EXPECT_TRUE(Contains(error, "no " + folder_ + "/input/config/resourceconfig.json")) << error;
  EXPECT_TRUE(Contains(error, "--hosts")) << error;
}

}  // namespace
}  // namespace keel
