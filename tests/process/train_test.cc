// `keel train` on one host: SageMaker's contract in a folder, the host
// algo-1 reached on loopback, a job trained from `keel datagen`'s data and
// scored by `keel predict`; and the failures a user makes, each leaving a
// reason in output/failure and a non-zero exit within seconds.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <regex>

#include "base/files.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::Contains;
using testing::KeelBinary;
using testing::ReadFileOrEmpty;

constexpr char kOneHost[] = R"({"current_host": "algo-1", "hosts": ["algo-1"],
                                "network_interface_name": "lo"})";
constexpr char kLibsvmChannels[] = R"({
  "train": {"ContentType": "text/libsvm", "TrainingInputMode": "File",
            "S3DistributionType": "FullyReplicated", "CompressionType": "None"},
  "validation": {"ContentType": "text/libsvm", "TrainingInputMode": "FastFile"},
  "test": {"ContentType": "text/libsvm"}})";

class TrainCommand : public testing::TempFolderTest {
 protected:
  TrainCommand() : TempFolderTest("train-contract") {}

  void WriteContract(const std::string& hyperparameters, const std::string& channels) {
    MakeDirectories(folder_ + "/input/config");
    testing::WriteFile(folder_ + "/input/config/hyperparameters.json", hyperparameters);
    testing::WriteFile(folder_ + "/input/config/resourceconfig.json", kOneHost);
    testing::WriteFile(folder_ + "/input/config/inputdataconfig.json", channels);
  }

  // `keel datagen`'s linear data: input/data/train, validation and test.
  void GenerateData(int rows) {
    const auto exit = testing::GenerateLinearData(folder_ + "/input/data", rows, 3);
    ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  }

  testing::Exit Train(double timeout_s) {
    return testing::Run({KeelBinary(), "train", "--sagemaker_root=" + folder_,
                         "--sagemaker_addresses=algo-1=127.0.0.1",
                         "--sagemaker_port=" + std::to_string(testing::UnusedPort())},
                        timeout_s);
  }

  std::string Failure() const { return ReadFileOrEmpty(folder_ + "/output/failure"); }
};

TEST_F(TrainCommand, OneHostTrainsAModelThatPredictScoresAsTheJobDid) {
  GenerateData(5000);
  WriteContract(R"({"feature_dim": "2000", "predictor_type": "binary_classifier",
                    "epochs": "2", "mini_batch_size": "64",
                    "_tuning_objective_metric": "validation:roc_auc_score"})",
                kLibsvmChannels);
  const auto exit = Train(180);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output << Failure();
  EXPECT_EQ(Failure(), "");
  EXPECT_TRUE(Contains(exit.output, "_tuning_objective_metric=validation:roc_auc_score"))
      << exit.output;
  // The metric lines, as the documented MetricDefinitions read them.
  for (const char* pattern :
       {"keel-metric epoch=1 train:objective_loss=([0-9.eE+-]+)",
        "keel-metric epoch=2 validation:objective_loss=([0-9.eE+-]+)",
        "keel-metric epoch=2 validation:roc_auc_score=([0-9.eE+-]+)",
        "keel-metric epoch=2 validation:binary_classification_accuracy=([0-9.eE+-]+)",
        "keel-metric final test:roc_auc_score=([0-9.eE+-]+)"}) {
    EXPECT_TRUE(std::regex_search(exit.output, std::regex(pattern))) << pattern << exit.output;
  }
  const auto metrics = testing::ReadMetrics(folder_ + "/model/metrics.json");
  ASSERT_TRUE(metrics.count("test:roc_auc_score")) << exit.output;
  EXPECT_GT(metrics.at("test:roc_auc_score"), 0.7);

  const auto predict =
      testing::Run({KeelBinary(), "predict", "--model_dir=" + folder_ + "/model",
                    "--data=" + folder_ + "/input/data/test", "--out=" + folder_ + "/scores.csv"},
                   60);
  ASSERT_TRUE(predict.finished && predict.code == 0) << predict.output;
  std::smatch auc;
  ASSERT_TRUE(std::regex_search(predict.output, auc, std::regex("roc_auc_score ([0-9.]+)")))
      << predict.output;
  EXPECT_NEAR(std::stod(auc[1]), metrics.at("test:roc_auc_score"), 1e-4);
}

// A pass that fits the batch cache: the first pass's FIFO alone is read
// (nothing ever makes train_1).
TEST_F(TrainCommand, APipeChannelIsReadOnceFromItsFirstPassesFifo) {
  GenerateData(5000);
  const std::string fifo = folder_ + "/input/data/train_0";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  WriteContract(R"({"feature_dim": "2000", "epochs": "3", "mini_batch_size": "64"})",
                R"({"train": {"ContentType": "text/libsvm", "TrainingInputMode": "Pipe"},
                    "validation": {"ContentType": "text/libsvm"}})");
  // SageMaker's side: the channel's bytes streamed into the FIFO.
  testing::Processes processes;
  const pid_t writer =
      processes.Start({"/bin/sh", "-c", "cat " + folder_ + "/input/data/train/* > " + fifo});
  const auto exit = Train(180);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output << Failure();
  EXPECT_TRUE(
      std::regex_search(exit.output, std::regex("keel-metric epoch=3 validation:roc_auc_score=")))
      << exit.output;
  const auto written = processes.Wait(writer, 10);
  EXPECT_TRUE(written.finished && written.code == 0) << written.output;
  // The statistics came from the stream's first rows (here all of them),
  // which were trained on with the rest (the stream's rows are not known
  // before its end): every pass saw the whole stream, the first read it, the
  // others the batch cache.
  EXPECT_TRUE(Contains(exit.output, "the data statistics come from the first 5000 rows of pipe:" +
                                        folder_ + "/input/data/train_0,"))
      << exit.output;
  EXPECT_TRUE(
      Contains(exit.output, R"("sample_rows":5000,"training_rows":0,"features_scaled":true)"))
      << exit.output;
  const auto metrics = testing::ReadMetrics(folder_ + "/model/metrics.json");
  EXPECT_EQ(metrics.count("validation:roc_auc_score"), 1u);
  EXPECT_EQ(metrics.at("train:examples_per_epoch"), 5000) << exit.output;
  EXPECT_EQ(metrics.at("train:epochs"), 3) << exit.output;
}

// SageMaker's Pipe mode as it gives a channel: a FIFO per pass, the next
// one made once the one before it was read to its end. A pass larger than
// the batch cache (--cache_max_bytes, 1 MiB here) is read from its own FIFO.
TEST_F(TrainCommand, APipeChannelTooLargeForTheCacheIsReadFromEachPassesFifo) {
  GenerateData(12000);
  WriteContract(R"({"feature_dim": "2000", "epochs": "3", "mini_batch_size": "64",
                    "cache_max_bytes": "1048576", "num_point_for_scaler": "1000"})",
                R"({"train": {"ContentType": "text/libsvm", "TrainingInputMode": "Pipe"},
                    "validation": {"ContentType": "text/libsvm"}})");
  const std::string fifo = folder_ + "/input/data/train_";
  testing::Processes processes;
  const pid_t writer = processes.Start(
      {"/bin/sh", "-c",
       "for pass in 0 1 2; do mkfifo " + fifo + "$pass && cat " + folder_ +
           "/input/data/train/* > " + fifo + "$pass && echo pass $pass written || exit 1; done"});
  const auto exit = Train(180);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output << Failure();
  EXPECT_TRUE(Contains(exit.output, "the pass over pipe:" + fifo +
                                        "1 is not cached (see above); the next epoch reads the "
                                        "next pass's stream"))
      << exit.output;
  const auto written = processes.Wait(writer, 10);
  ASSERT_TRUE(written.finished && written.code == 0) << written.output;
  EXPECT_TRUE(Contains(written.output, "pass 2 written")) << written.output;
  // The statistics' 1,000 rows were trained on too: every pass read its FIFO whole.
  EXPECT_TRUE(Contains(exit.output, R"("sample_rows":1000,)")) << exit.output;
  const auto metrics = testing::ReadMetrics(folder_ + "/model/metrics.json");
  EXPECT_EQ(metrics.at("train:examples_per_epoch"), 12000) << exit.output;
  EXPECT_EQ(metrics.at("train:epochs"), 3) << exit.output;
}

TEST_F(TrainCommand, AGzipChannelIsUnpackedAndReadWhole) {
  GenerateData(5000);
  const auto zipped = testing::Shell("gzip " + folder_ + "/input/data/train/*");
  ASSERT_TRUE(zipped.finished && zipped.code == 0) << zipped.output;
  WriteContract(R"({"feature_dim": "2000", "epochs": "2", "mini_batch_size": "64"})",
                R"({"train": {"ContentType": "text/libsvm", "CompressionType": "Gzip"},
                    "validation": {"ContentType": "text/libsvm"}})");
  const auto exit = Train(180);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output << Failure();
  EXPECT_TRUE(Contains(exit.output, "channel train: its gzip files unpacked into")) << exit.output;
  const auto metrics = testing::ReadMetrics(folder_ + "/model/metrics.json");
  EXPECT_EQ(metrics.at("train:examples_per_epoch"), 5000) << exit.output;
}

TEST_F(TrainCommand, ASecretFileHyperparameterEncryptsEveryConnection) {
  GenerateData(2000);
  const std::string secret = folder_ + "/cluster.secret";
  const auto made = testing::Run({KeelBinary(), "keygen", "--out=" + secret}, 30);
  ASSERT_TRUE(made.finished && made.code == 0) << made.output;
  WriteContract(R"({"feature_dim": "2000", "epochs": "2", "secret_file": ")" + secret + R"("})",
                kLibsvmChannels);
  const auto exit = Train(180);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output << Failure();
  EXPECT_FALSE(Contains(exit.output, "INSECURE")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "keel-metric epoch=2 ")) << exit.output;
}

TEST_F(TrainCommand, ASigtermCheckpointsAndTheSameCommandResumesAndFinishes) {
  GenerateData(20000);
  WriteContract(R"({"feature_dim": "2000", "epochs": "30", "mini_batch_size": "32",
                    "early_stopping_patience": "100"})",
                R"({"train": {"ContentType": "text/libsvm"}})");
  const std::vector<std::string> command = {
      KeelBinary(),
      "train",
      "--sagemaker_root=" + folder_,
      "--sagemaker_addresses=algo-1=127.0.0.1",
      "--sagemaker_port=" + std::to_string(testing::UnusedPort()),
      "--preemption_grace=30"};
  testing::Processes processes;
  const pid_t first = processes.Start(command);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return Contains(processes.Output(first), "keel-metric epoch=1 "); }, 120))
      << processes.Output(first);
  kill(first, SIGTERM);
  const auto preempted = processes.Wait(first, 60);
  ASSERT_TRUE(preempted.finished) << preempted.output;
  EXPECT_EQ(preempted.code, 75) << preempted.output;
  EXPECT_TRUE(Contains(Failure(), "algo-1: scheduler: preempted")) << Failure();
  ASSERT_NE(ReadFileOrEmpty(folder_ + "/checkpoints/LATEST"), "") << preempted.output;
  EXPECT_FALSE(Contains(preempted.output, "keel-metric epoch=30 ")) << preempted.output;

  const auto resumed = testing::Run(command, 180);
  ASSERT_TRUE(resumed.finished && resumed.code == 0) << resumed.output << Failure();
  EXPECT_TRUE(Contains(resumed.output, "the job resumes from it")) << resumed.output;
  EXPECT_FALSE(Contains(resumed.output, "keel-metric epoch=1 ")) << resumed.output;
  EXPECT_TRUE(Contains(resumed.output, "keel-metric epoch=30 ")) << resumed.output;
  EXPECT_EQ(Failure(), "");
  EXPECT_EQ(testing::ReadMetrics(folder_ + "/model/metrics.json").count("train:objective_loss"),
            1u);
}

TEST_F(TrainCommand, AnUnknownHyperparameterFailsBeforeTrainingNamingIt) {
  GenerateData(1000);
  WriteContract(R"({"epochs": "2", "num_layers": "3"})", kLibsvmChannels);
  const auto exit = Train(30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(Failure(), "algo-1: ")) << Failure();
  EXPECT_TRUE(Contains(Failure(), "hyperparameter num_layers: neither Keel nor SageMaker"))
      << Failure();
  EXPECT_FALSE(Contains(exit.output, "[worker 0]")) << exit.output;
}

TEST_F(TrainCommand, GflagsOwnFlagsAreNotHyperparameters) {
  GenerateData(1000);
  WriteContract(R"({"flagfile": "/etc/hostname"})", kLibsvmChannels);
  const auto exit = Train(30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(Failure(), "hyperparameter flagfile: neither Keel nor SageMaker"))
      << Failure();
}

TEST_F(TrainCommand, CheckFlagsReadsTheContractAndStartsNothing) {
  GenerateData(1000);
  WriteContract(R"({"feature_dim": "2000", "epochs": "2"})", kLibsvmChannels);
  const auto exit =
      testing::Run({KeelBinary(), "train", "--sagemaker_root=" + folder_, "--check_flags"}, 30);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "flags ok")) << exit.output;
  EXPECT_FALSE(Contains(exit.output, "[worker 0]")) << exit.output;
  EXPECT_EQ(ReadFileOrEmpty(folder_ + "/model/model.json"), "");
}

TEST_F(TrainCommand, ABadHyperparameterValueFailsBeforeTrainingNamingIt) {
  GenerateData(1000);
  WriteContract(R"({"epochs": "many"})", kLibsvmChannels);
  const auto exit = Train(30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(Failure(), "hyperparameter epochs 'many' is not a valid value"))
      << Failure();
  EXPECT_FALSE(Contains(exit.output, "[worker 0]")) << exit.output;
}

TEST_F(TrainCommand, AMissingChannelFailsNamingIt) {
  WriteContract(R"({"epochs": "2"})", kLibsvmChannels);  // no input/data at all
  const auto exit = Train(30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(Failure(), "algo-1: channel train: ")) << Failure();
  EXPECT_TRUE(Contains(Failure(), folder_ + "/input/data/train")) << Failure();
}

TEST_F(TrainCommand, GarbageDataFailsTheJobWithTheWorkersReason) {
  MakeDirectories(folder_ + "/input/data/train");
  testing::WriteFile(folder_ + "/input/data/train/part-0",
                     "1 3:1 7:0.5\nthis is not libsvm at all\n0 2:1\n");
  WriteContract(R"({"epochs": "2", "feature_dim": "100"})",
                R"({"train": {"ContentType": "text/libsvm"}})");
  const auto exit = Train(90);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0);
  const std::string failure = Failure();
  EXPECT_TRUE(Contains(failure, "algo-1: worker 0: ")) << failure << exit.output;
  EXPECT_TRUE(Contains(failure, "part-0")) << failure;
  EXPECT_LT(failure.size(), 1100u);
}

TEST_F(TrainCommand, DataThatContradictsItsContentTypeFailsBeforeTraining) {
  GenerateData(1000);  // libsvm
  WriteContract(R"({"feature_dim": "2000"})", R"({"train": {"ContentType": "text/csv"}})");
  const auto exit = Train(30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(Failure(), "algo-1: channel train (its ContentType reads as csv): "))
      << Failure();
  EXPECT_TRUE(Contains(Failure(), "libsvm")) << Failure();
  EXPECT_FALSE(Contains(exit.output, "[worker 0]")) << exit.output;
}

TEST_F(TrainCommand, BadJsonNamesTheFile) {
  WriteContract("{\"epochs\": \"2\",}", kLibsvmChannels);
  const auto exit = Train(30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(Failure(), folder_ + "/input/config/hyperparameters.json: byte"))
      << Failure();
}

// The hosts as a Kubernetes Indexed Job gives them: --hosts and the pod's
// JOB_COMPLETION_INDEX in place of resourceconfig.json (three pods as
// namespaces: tests/multihost, KubernetesPods).
class TrainCommandWithHostsFlags : public TrainCommand {
 protected:
  void WriteContractWithoutHosts(const std::string& hyperparameters) {
    WriteContract(hyperparameters, kLibsvmChannels);
    std::remove((folder_ + "/input/config/resourceconfig.json").c_str());
  }

  testing::Exit TrainAsPod(const std::string& index, const std::string& hosts, double timeout_s) {
    return testing::Run({"/usr/bin/env", "JOB_COMPLETION_INDEX=" + index, KeelBinary(), "train",
                         "--sagemaker_root=" + folder_, "--hosts=" + hosts,
                         "--sagemaker_addresses=keel-train-0.keel-train=127.0.0.1",
                         "--sagemaker_port=" + std::to_string(testing::UnusedPort())},
                        timeout_s);
  }
};

TEST_F(TrainCommandWithHostsFlags, OnePodTrainsWithoutAResourceConfig) {
  GenerateData(2000);
  WriteContractWithoutHosts(R"({"feature_dim": "2000", "epochs": "2"})");
  const auto exit = TrainAsPod("0", "keel-train-{0..0}.keel-train", 180);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output << Failure();
  EXPECT_TRUE(Contains(exit.output, "this host: keel-train-0.keel-train, index 0 of 1"))
      << exit.output;
  EXPECT_TRUE(Contains(exit.output, "host keel-train-0.keel-train (the leader: scheduler"))
      << exit.output;
  EXPECT_EQ(testing::ReadMetrics(folder_ + "/model/metrics.json").count("train:objective_loss"), 1u)
      << exit.output;
}

TEST_F(TrainCommandWithHostsFlags, AResourceConfigBesideHostsIsRefusedNamingBoth) {
  GenerateData(1000);
  WriteContract(R"({"epochs": "2"})", kLibsvmChannels);
  const auto exit = TrainAsPod("0", "keel-train-0.keel-train", 30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(Failure(), "resourceconfig.json and --hosts give the hosts: give one"))
      << Failure();
  EXPECT_FALSE(Contains(exit.output, "[worker 0]")) << exit.output;
}

TEST_F(TrainCommandWithHostsFlags, NeitherHostsNorAResourceConfigSaysWhatToGive) {
  GenerateData(1000);
  WriteContractWithoutHosts(R"({"epochs": "2"})");
  const auto exit = Train(30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(Failure(), "no " + folder_ + "/input/config/resourceconfig.json"))
      << Failure();
  EXPECT_TRUE(Contains(Failure(), "give the hosts with --hosts")) << Failure();
}

TEST_F(TrainCommandWithHostsFlags, AnIndexBeyondTheHostsIsRefusedNamingIt) {
  GenerateData(1000);
  WriteContractWithoutHosts(R"({"epochs": "2"})");
  const auto exit = TrainAsPod("3", "keel-train-{0..2}.keel-train", 30);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(exit.output,
                       "JOB_COMPLETION_INDEX '3' is not an index of --hosts' 3 host(s) (0 to 2)"))
      << exit.output;
  EXPECT_FALSE(Contains(exit.output, "[worker 0]")) << exit.output;
}

}  // namespace
}  // namespace keel
