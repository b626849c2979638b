// SageMaker's training contract as `keel train` reads it: the three config
// files and the hyperparameters' translation to Keel's flags (the command
// itself: tests/process/train_test.cc).
#include "launch/sagemaker_contract.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/files.h"
#include "launch/gzip_channel.h"
#include "launch/sagemaker_hyperparameters.h"
#include "launch/sagemaker_train.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::ErrorOf;

TEST(SageMakerHyperparameters, ReadsEveryValueAsAString) {
  const auto given = ParseHyperparameters(
      R"({"feature_dim": "2000", "predictor_type": "binary_classifier", "_kvstore": "dist_sync"})",
      "hp.json");
  ASSERT_EQ(given.size(), 3u);
  EXPECT_EQ(given[0].name, "feature_dim");
  EXPECT_EQ(given[0].value, "2000");
  EXPECT_EQ(given[2].name, "_kvstore");
}

TEST(SageMakerHyperparameters, RefuseAValueThatIsNotAString) {
  EXPECT_TRUE(Contains(ErrorOf([] { ParseHyperparameters(R"({"epochs": 3})", "hp.json"); }),
                       "hp.json: hyperparameter 'epochs' is a number: SageMaker passes every "
                       "value as a string"));
  EXPECT_TRUE(Contains(ErrorOf([] { ParseHyperparameters("[1]", "hp.json"); }),
                       "hp.json is an array, not a JSON object"));
  EXPECT_TRUE(Contains(ErrorOf([] { ParseHyperparameters(R"({"epochs": "3",})", "hp.json"); }),
                       "hp.json: byte"));
}

bool AnyKeelFlag(const std::string& name) { return name != "no_such_flag"; }

TEST(SageMakerHyperparameters, BecomeTheRolesFlags) {
  const TrainHyperparameters t = TranslateHyperparameters(
      {{"feature_dim", "2000"}, {"mini_batch_size", "100"}, {"job", "factorization_machines"}},
      "hp.json", AnyKeelFlag);
  EXPECT_EQ(t.role_flags, (std::vector<std::string>{"--feature_dim=2000", "--mini_batch_size=100",
                                                    "--job=factorization_machines"}));
  EXPECT_EQ(t.job, "factorization_machines");
  EXPECT_EQ(t.servers_per_host, 1);
  EXPECT_EQ(t.workers_per_host, 1);
  EXPECT_EQ(t.checkpoint_dir, "");
}

TEST(SageMakerHyperparameters, KeepReservedNamesAside) {
  const TrainHyperparameters t = TranslateHyperparameters(
      {{"_tuning_objective_metric", "validation:roc_auc_score"}, {"epochs", "2"}}, "hp.json",
      AnyKeelFlag);
  ASSERT_EQ(t.reserved.size(), 1u);
  EXPECT_EQ(t.reserved[0].name, "_tuning_objective_metric");
  EXPECT_EQ(t.role_flags, std::vector<std::string>{"--epochs=2"});
}

TEST(SageMakerHyperparameters, TakeTrainsOwnSplitAndCheckpointFolder) {
  const TrainHyperparameters t = TranslateHyperparameters(
      {{"servers_per_host", "2"}, {"workers_per_host", "3"}, {"checkpoint_dir", "/ckpt"}},
      "hp.json", AnyKeelFlag);
  EXPECT_EQ(t.servers_per_host, 2);
  EXPECT_EQ(t.workers_per_host, 3);
  EXPECT_EQ(t.checkpoint_dir, "/ckpt");
  EXPECT_TRUE(t.role_flags.empty());
}

TEST(SageMakerHyperparameters, NameAnUnknownNameOrABadValue) {
  EXPECT_EQ(ErrorOf([] {
              TranslateHyperparameters({{"no_such_flag", "1"}}, "hp.json", AnyKeelFlag);
            }),
            "hp.json: hyperparameter no_such_flag: neither Keel nor SageMaker's Linear Learner or "
            "Factorization Machines knows it");
  EXPECT_TRUE(
      Contains(ErrorOf([] {
                 TranslateHyperparameters({{"workers_per_host", "0"}}, "hp.json", AnyKeelFlag);
               }),
               "hp.json: hyperparameter workers_per_host '0' is not a whole number in [1, 64]"));
  EXPECT_TRUE(
      Contains(ErrorOf([] {
                 TranslateHyperparameters({{"checkpoint_dir", "ckpt"}}, "hp.json", AnyKeelFlag);
               }),
               "'ckpt' is not an absolute path"));
}

TEST(SageMakerHyperparameters, RefuseWhatTheContractDecides) {
  EXPECT_TRUE(Contains(ErrorOf([] {
                         TranslateHyperparameters({{"train", "/data"}}, "hp.json", AnyKeelFlag);
                       }),
                       "hp.json: hyperparameter train: keel train sets --train itself"));
}

TEST(SageMakerHyperparameters, NameASageMakerOneKeelLacks) {
  const auto no_keel_flag = [](const std::string&) { return false; };
  EXPECT_TRUE(Contains(ErrorOf([&] {
                         TranslateHyperparameters({{"num_factors", "4"}}, "hp.json", no_keel_flag);
                       }),
                       "num_factors: SageMaker's hyperparameter has no Keel equivalent"));
}

TEST(SageMakerResourceConfig, SortsTheHostsAndFindsTheLeader) {
  const SageMakerHosts hosts = ParseResourceConfig(
      R"({"current_host": "algo-2", "hosts": ["algo-3", "algo-1", "algo-2"],
          "network_interface_name": "eth0"})",
      "rc.json");
  EXPECT_EQ(hosts.hosts, (std::vector<std::string>{"algo-1", "algo-2", "algo-3"}));
  EXPECT_EQ(hosts.Leader(), "algo-1");
  EXPECT_EQ(hosts.CurrentIndex(), 1);
  EXPECT_FALSE(hosts.Leads());
  EXPECT_EQ(hosts.network_interface_name, "eth0");
}

TEST(SageMakerResourceConfig, NamesWhatIsWrong) {
  EXPECT_EQ(ErrorOf([] { ParseResourceConfig(R"({"hosts": ["algo-1"]})", "rc.json"); }),
            "rc.json: no current_host");
  EXPECT_EQ(
      ErrorOf([] { ParseResourceConfig(R"({"current_host": "a", "hosts": []})", "rc.json"); }),
      "rc.json: hosts must be a non-empty array of host names");
  EXPECT_EQ(ErrorOf([] {
              ParseResourceConfig(R"({"current_host": "c", "hosts": ["a", "b"]})", "rc.json");
            }),
            "rc.json: current_host c is not among the hosts");
  EXPECT_EQ(ErrorOf([] {
              ParseResourceConfig(R"({"current_host": "a", "hosts": ["a", "a"]})", "rc.json");
            }),
            "rc.json: hosts names a twice");
  EXPECT_EQ(
      ErrorOf([] { ParseResourceConfig(R"({"current_host": 1, "hosts": ["a"]})", "rc.json"); }),
      "rc.json: current_host is a number, not a string");
}

TEST(SageMakerInputDataConfig, ReadsEachChannel) {
  const auto channels = ParseInputDataConfig(
      R"({"train": {"ContentType": "text/csv; label_size=1", "TrainingInputMode": "Pipe",
                    "S3DistributionType": "ShardedByS3Key", "CompressionType": "None",
                    "RecordWrapperType": "None"},
          "validation": {"ContentType": "application/x-recordio-protobuf",
                         "TrainingInputMode": "FastFile", "CompressionType": "Gzip"},
          "test": {}})",
      "idc.json");
  ASSERT_EQ(channels.size(), 3u);
  EXPECT_EQ(channels[0].name, "train");
  EXPECT_EQ(channels[0].data_format, "csv");
  EXPECT_EQ(channels[0].mode, SageMakerChannel::InputMode::kPipe);
  EXPECT_TRUE(channels[0].sharded_by_key);
  EXPECT_FALSE(channels[0].gzip);
  EXPECT_EQ(channels[1].data_format, "recordio-protobuf");
  EXPECT_EQ(channels[1].mode, SageMakerChannel::InputMode::kFile);
  EXPECT_TRUE(channels[1].gzip);
  EXPECT_FALSE(channels[1].sharded_by_key);
  EXPECT_EQ(channels[2].data_format, "");
}

TEST(SageMakerInputDataConfig, MapsContentTypesToDataFormats) {
  EXPECT_EQ(DataFormatOfContentType("text/csv", "c"), "csv");
  EXPECT_EQ(DataFormatOfContentType("text/csv;label_size=1", "c"), "csv");
  EXPECT_EQ(DataFormatOfContentType("text/libsvm", "c"), "libsvm");
  EXPECT_EQ(DataFormatOfContentType("text/x-libsvm", "c"), "libsvm");
  EXPECT_EQ(DataFormatOfContentType("application/x-recordio-protobuf", "c"), "recordio-protobuf");
  EXPECT_TRUE(Contains(ErrorOf([] { DataFormatOfContentType("text/csv;label_size=2", "c"); }),
                       "c: ContentType 'text/csv;label_size=2': Keel reads text/csv with "
                       "label_size=1"));
  EXPECT_TRUE(Contains(ErrorOf([] { DataFormatOfContentType("application/json", "c"); }),
                       "c: ContentType 'application/json' is not one Keel reads"));
}

TEST(SageMakerInputDataConfig, RefusesWhatItDoesNotRead) {
  EXPECT_EQ(ErrorOf([] {
              ParseInputDataConfig(R"({"train": {"TrainingInputMode": "Stream"}})", "idc.json");
            }),
            "idc.json: channel train: TrainingInputMode 'Stream' is not one Keel reads (File, "
            "FastFile, Pipe)");
  EXPECT_TRUE(Contains(ErrorOf([] {
                         ParseInputDataConfig(R"({"train": {"CompressionType": "Bzip2"}})",
                                              "idc.json");
                       }),
                       "CompressionType 'Bzip2'"));
  EXPECT_TRUE(Contains(ErrorOf([] {
                         ParseInputDataConfig(R"({"train": {"S3DistributionType": "Random"}})",
                                              "idc.json");
                       }),
                       "S3DistributionType 'Random'"));
  EXPECT_EQ(ErrorOf([] { ParseInputDataConfig(R"({"extra": {}, "train": {}})", "idc.json"); }),
            "idc.json: channel extra: Keel reads the channels train, validation and test");
  EXPECT_EQ(ErrorOf([] { ParseInputDataConfig(R"({"validation": {}})", "idc.json"); }),
            "idc.json: no train channel");
}

SageMakerContract ContractOf(const std::string& channels) {
  SageMakerContract contract;
  contract.root = "/ml";
  contract.channels = ParseInputDataConfig(channels, "idc.json");
  return contract;
}

// The channel flags of `channels` (inputdataconfig.json's text) for
// `workers_per_host` workers a host, Gzip channels unpacked under /unpacked.
std::vector<std::string> FlagsOf(const std::string& channels, int workers_per_host = 1) {
  return SageMakerChannelFlags(ContractOf(channels), workers_per_host, "/unpacked");
}

TEST(SageMakerChannels, BecomeTheRolesChannelFlags) {
  EXPECT_EQ(
      FlagsOf(R"({"train": {"ContentType": "text/csv"},
                        "validation": {"TrainingInputMode": "FastFile"}})"),
      (std::vector<std::string>{"--train=/ml/input/data/train",
                                "--validation=/ml/input/data/validation", "--data_format=csv"}));
  EXPECT_EQ(FlagsOf(R"({"train": {"TrainingInputMode": "Pipe"}})"),
            std::vector<std::string>{"--train=pipe:/ml/input/data/train_{pass}"});
}

TEST(SageMakerChannels, AGzipChannelIsReadFromWhereItsFilesAreUnpacked) {
  EXPECT_EQ(FlagsOf(R"({"train": {"CompressionType": "Gzip"}, "test": {}})"),
            (std::vector<std::string>{"--train=/unpacked/train", "--test=/ml/input/data/test"}));
}

TEST(SageMakerChannels, AShardedTrainChannelIsSplitWithinEachHost) {
  EXPECT_EQ(FlagsOf(R"({"train": {"S3DistributionType": "ShardedByS3Key"}})", 2),
            (std::vector<std::string>{"--train=/ml/input/data/train", "--split_within_host=2"}));
}

TEST(SageMakerChannels, RefuseWhatKeelTrainDoesNotReadYet) {
  EXPECT_TRUE(Contains(ErrorOf([] {
                         FlagsOf(R"({"train": {"CompressionType": "Gzip",
                                               "TrainingInputMode": "Pipe"}})");
                       }),
                       "channel train: a Gzip channel in Pipe mode is not read by keel train yet"));
  EXPECT_TRUE(Contains(ErrorOf([] { FlagsOf(R"({"train": {"TrainingInputMode": "Pipe"}})", 2); }),
                       "workers_per_host must be 1"));
  EXPECT_TRUE(
      Contains(ErrorOf([] { FlagsOf(R"({"train": {}, "test": {"TrainingInputMode": "Pipe"}})"); }),
               "channel test: Pipe mode is read for the train channel only"));
  EXPECT_TRUE(Contains(
      ErrorOf([] {
        FlagsOf(R"({"train": {}, "validation": {"S3DistributionType": "ShardedByS3Key"}})");
      }),
      "channel validation: S3DistributionType ShardedByS3Key is read for the train channel only"));
  EXPECT_TRUE(Contains(ErrorOf([] {
                         FlagsOf(R"({"train": {"ContentType": "text/csv"},
                                     "test": {"ContentType": "text/libsvm"}})");
                       }),
                       "Keel reads every channel in one format"));
}

TEST(SageMakerHostPlan, TheFirstSortedHostLeadsAndRanksFollowTheSortedOrder) {
  SageMakerHosts hosts = ParseResourceConfig(
      R"({"current_host": "algo-2", "hosts": ["algo-2", "algo-1", "algo-3"]})", "rc.json");
  const SageMakerHostPlan plan = PlanSageMakerHost(hosts, 2, 3, 9800, {});
  EXPECT_FALSE(plan.leads);
  EXPECT_EQ(plan.scheduler, "algo-1:9800");
  EXPECT_EQ(plan.servers, 6);
  EXPECT_EQ(plan.workers, 9);
  EXPECT_EQ(plan.first_server, 2);
  EXPECT_EQ(plan.first_worker, 3);
  EXPECT_EQ(plan.host_servers, 2);
  EXPECT_EQ(plan.host_workers, 3);
  EXPECT_EQ(plan.watch_port, 9801);
  ASSERT_EQ(plan.others.size(), 2u);
  EXPECT_EQ(plan.others[0].name, "algo-1");
  EXPECT_TRUE(plan.others[0].leader);
  EXPECT_EQ(plan.others[1].address, "algo-3");
  EXPECT_FALSE(plan.others[1].leader);
  hosts.current_host = "algo-1";
  const SageMakerHostPlan leader = PlanSageMakerHost(hosts, 1, 1, 9800, {{"algo-1", "10.0.0.1"}});
  EXPECT_TRUE(leader.leads);
  EXPECT_EQ(leader.scheduler, "10.0.0.1:9800");
  EXPECT_EQ(leader.first_worker, 0);
}

TEST(SageMakerMetrics, EpochAndEndRecordsBecomeOneLineAFigure) {
  ProgressRecord epoch;
  epoch.type = ProgressRecord::Type::kEpoch;
  epoch.epoch = 3;
  epoch.metrics = {{"train:objective_loss", 0.4125}, {"validation:roc_auc_score", 0.86}};
  EXPECT_EQ(SageMakerMetricLines(epoch),
            (std::vector<std::string>{"keel-metric epoch=3 train:objective_loss=0.4125",
                                      "keel-metric epoch=3 validation:roc_auc_score=0.86"}));
  ProgressRecord end;
  end.type = ProgressRecord::Type::kEnd;
  end.metrics = {{"test:mse", std::nan("")}};
  EXPECT_EQ(SageMakerMetricLines(end), std::vector<std::string>{"keel-metric final test:mse=nan"});
  EXPECT_TRUE(SageMakerMetricLines(ProgressRecord()).empty());  // a progress record
}

class SageMakerContractFiles : public testing::TempFolderTest {
 protected:
  void WriteConfig(const std::string& name, const std::string& text) {
    MakeDirectories(folder_ + "/input/config");
    testing::WriteFile(folder_ + "/input/config/" + name, text);
  }
};

TEST_F(SageMakerContractFiles, ReadsTheThreeFilesAndNamesThePaths) {
  WriteConfig("hyperparameters.json", R"({"epochs": "2"})");
  WriteConfig("resourceconfig.json", R"({"current_host": "algo-1", "hosts": ["algo-1"]})");
  WriteConfig("inputdataconfig.json", R"({"train": {"ContentType": "text/libsvm"}})");
  const SageMakerContract contract = ReadSageMakerContract(folder_);
  EXPECT_EQ(contract.hyperparameters.size(), 1u);
  EXPECT_TRUE(contract.hosts.Leads());
  ASSERT_NE(contract.Channel("train"), nullptr);
  EXPECT_EQ(contract.Channel("validation"), nullptr);
  EXPECT_EQ(contract.ChannelFolder("train"), folder_ + "/input/data/train");
  EXPECT_EQ(contract.ChannelPipe("train", 1), folder_ + "/input/data/train_1");
  EXPECT_EQ(contract.ModelFolder(), folder_ + "/model");
  EXPECT_EQ(contract.FailureFile(), folder_ + "/output/failure");
  EXPECT_EQ(contract.CheckpointFolder(), folder_ + "/checkpoints");
}

TEST_F(SageMakerContractFiles, NamesAMissingFile) {
  WriteConfig("hyperparameters.json", "{}");
  EXPECT_TRUE(Contains(ErrorOf([&] { ReadSageMakerContract(folder_); }),
                       folder_ + "/input/config/resourceconfig.json"));
}

TEST_F(SageMakerContractFiles, NamesAFileOfBadJson) {
  WriteConfig("hyperparameters.json", "{\"epochs\": ");
  EXPECT_TRUE(Contains(ErrorOf([&] { ReadSageMakerContract(folder_); }),
                       folder_ + "/input/config/hyperparameters.json: byte"));
}

TEST_F(SageMakerContractFiles, FailureFileHoldsAShortReason) {
  WriteSageMakerFailure(folder_, "algo-1: worker 0: bad data");
  EXPECT_EQ(ReadFile(folder_ + "/output/failure"), "algo-1: worker 0: bad data\n");
  WriteSageMakerFailure(folder_, std::string(3000, 'x'));
  EXPECT_EQ(ReadFile(folder_ + "/output/failure").size(), 1025u);
}

TEST_F(SageMakerContractFiles, GzipFilesAreUnpackedUnderTheirNamesWithoutGz) {
  MakeDirectories(folder_ + "/gz");
  testing::WriteFile(folder_ + "/gz/part-0.libsvm", "1 3:1\n0 2:1\n");
  testing::WriteFile(folder_ + "/gz/part-1", "1 1:1\n");
  const auto zipped = testing::Shell("gzip " + folder_ + "/gz/part-0.libsvm && gzip -S .z " +
                                     folder_ + "/gz/part-1");
  ASSERT_TRUE(zipped.finished && zipped.code == 0) << zipped.output;
  EXPECT_EQ(UnpackGzipFolder(folder_ + "/gz", folder_ + "/out"), 18u);
  EXPECT_EQ(ReadFile(folder_ + "/out/part-0.libsvm"), "1 3:1\n0 2:1\n");
  EXPECT_EQ(ReadFile(folder_ + "/out/part-1.z"), "1 1:1\n");
}

TEST_F(SageMakerContractFiles, AFileThatIsNotGzipIsRefusedNamingIt) {
  MakeDirectories(folder_ + "/gz");
  testing::WriteFile(folder_ + "/gz/part-0", "1 3:1\n");
  EXPECT_EQ(ErrorOf([&] { UnpackGzipFolder(folder_ + "/gz", folder_ + "/out"); }),
            folder_ + "/gz/part-0 is not gzip (the channel's CompressionType is Gzip)");
}

}  // namespace
}  // namespace keel
