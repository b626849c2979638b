// The training jobs end to end: `keel datagen`, `keel launch --job=...` on a
// local cluster, `keel predict`.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "test_util.h"

namespace keel {
namespace {

using testing::KeelBinary;


bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The numbers of a flat JSON object of numbers.
std::map<std::string, double> ReadMetrics(const std::string& path) {
  std::map<std::string, double> metrics;
  const std::string text = ReadFile(path);
  std::regex pair("\"([^\"]+)\": ([-0-9.eE+]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pair); it != std::sregex_iterator();
       ++it) {
    metrics[(*it)[1]] = std::stod((*it)[2]);
  }
  return metrics;
}

size_t CountLines(const std::string& path) {
  std::ifstream in(path);
  size_t lines = 0;
  std::string line;
  while (std::getline(in, line)) lines += !line.empty();
  return lines;
}

class TrainingJob : public ::testing::Test {
 protected:
  void SetUp() override {
    char folder[] = "/tmp/keel-train-XXXXXX";
    ASSERT_NE(mkdtemp(folder), nullptr);
    dir_ = folder;
  }
  void TearDown() override { testing::Run({"/bin/rm", "-rf", dir_}, 30); }

  void Generate(const std::string& model, int rows, int train_files) {
    const auto exit = testing::Run({KeelBinary(), "datagen", "--model=" + model,
                           "--rows=" + std::to_string(rows), "--features=2000", "--nnz=10",
                           "--num_factors=4", "--seed=7",
                           "--train_files=" + std::to_string(train_files), "--out=" + dir_},
                          60);
    ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  }

  testing::Exit Train(const std::vector<std::string>& flags, int workers, double timeout = 120) {
    std::vector<std::string> argv = {KeelBinary(), "launch", "--servers=2",
                                     "--workers=" + std::to_string(workers),
                                     "--train=" + dir_ + "/train",
                                     "--validation=" + dir_ + "/validation",
                                     "--test=" + dir_ + "/test", "--model_dir=" + dir_ + "/model",
                                     "--minloglevel=1"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return testing::Run(argv, timeout);
  }

  std::string dir_;
};

// Every epoch line says how many examples all workers consumed together.
std::vector<long> ExamplesPerEpoch(const std::string& output) {
  std::vector<long> counts;
  std::regex line("epoch [0-9]+: ([0-9]+) examples across");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    counts.push_back(std::stol((*it)[1]));
  }
  return counts;
}

TEST_F(TrainingJob, EveryExampleIsConsumedOncePerEpochWhenFilesAreShared) {
  Generate("linear", 5000, 5);  // more files than workers: whole files
  const auto exit = Train({"--job=linear_learner", "--epochs=2", "--mini_batch_size=64"}, 3);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  EXPECT_EQ(ExamplesPerEpoch(exit.output), (std::vector<long>{5000, 5000})) << exit.output;
}

TEST_F(TrainingJob, EveryExampleIsConsumedOncePerEpochWhenOneFileIsSplit) {
  Generate("linear", 5000, 1);  // one file for three workers: byte ranges
  const auto exit = Train({"--job=linear_learner", "--epochs=2", "--mini_batch_size=64"}, 3);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  EXPECT_EQ(ExamplesPerEpoch(exit.output), (std::vector<long>{5000, 5000})) << exit.output;
}

TEST_F(TrainingJob, LinearLearnerLearnsAndPredictReproducesItsTestScore) {
  Generate("linear", 40000, 4);
  const auto exit = Train({"--job=linear_learner", "--epochs=4", "--learning_rate=0.01"}, 2);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto metrics = ReadMetrics(dir_ + "/model/metrics.json");
  const auto oracle = ReadMetrics(dir_ + "/oracle.json");
  ASSERT_TRUE(metrics.count("validation:roc_auc_score")) << ReadFile(dir_ + "/model/metrics.json");
  ASSERT_TRUE(metrics.count("test:roc_auc_score"));
  // Far better than chance, and not better than the planted model.
  EXPECT_GT(metrics.at("validation:roc_auc_score"), 0.5 + 0.5 * (oracle.at("validation:roc_auc_score") - 0.5));
  EXPECT_LT(metrics.at("validation:roc_auc_score"), oracle.at("validation:roc_auc_score") + 0.01);
  EXPECT_GT(metrics.at("train:examples_per_second"), 0);

  const std::string predictions = dir_ + "/predictions.csv";
  const auto predict = testing::Run({KeelBinary(), "predict", "--model_dir=" + dir_ + "/model",
                            "--data=" + dir_ + "/test", "--out=" + predictions}, 60);
  ASSERT_TRUE(predict.finished && predict.code == 0) << predict.output;
  EXPECT_EQ(CountLines(predictions), 4000u);
  // The artifact holds the same weights the job scored the test channel with.
  std::smatch auc;
  ASSERT_TRUE(std::regex_search(predict.output, auc, std::regex("roc_auc_score ([0-9.]+)")))
      << predict.output;
  EXPECT_NEAR(std::stod(auc[1]), metrics.at("test:roc_auc_score"), 1e-4);
}

TEST_F(TrainingJob, FactorizationMachineTrainsEndToEnd) {
  Generate("fm", 20000, 2);
  const auto exit = Train({"--job=factorization_machines", "--num_factors=4", "--epochs=3",
                           "--factors_init_sigma=0.05"}, 2);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto metrics = ReadMetrics(dir_ + "/model/metrics.json");
  EXPECT_GT(metrics.at("validation:roc_auc_score"), 0.6);
  const std::string json = ReadFile(dir_ + "/model/model.json");
  EXPECT_TRUE(Contains(json, "\"job\":\"factorization_machines\"")) << json;
  EXPECT_TRUE(Contains(json, "\"num_factors\":4")) << json;
}

TEST_F(TrainingJob, ABadRecordFailsTheJobNamingFileAndLineUnlessSkipped) {
  Generate("linear", 2000, 1);
  {
    std::ofstream bad(dir_ + "/train/part-0.libsvm", std::ios::app);
    bad << "1 5:1 oops:1\n";
  }
  const std::string line = std::to_string(2000 + 1);
  auto exit = Train({"--job=linear_learner", "--epochs=1"}, 1);
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(exit.output, "part-0.libsvm:" + line)) << exit.output;

  exit = Train({"--job=linear_learner", "--epochs=1", "--skip_bad_records"}, 1);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  EXPECT_EQ(ExamplesPerEpoch(exit.output), (std::vector<long>{2000})) << exit.output;
}

TEST_F(TrainingJob, BadHyperparametersFailAtStartNamingTheFlag) {
  Generate("linear", 100, 1);
  const auto exit = Train({"--job=linear_learner", "--predictor_type=ranker"}, 1, 30);
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(exit.output, "--predictor_type 'ranker'")) << exit.output;
  EXPECT_LT(exit.seconds, 10);
}

}  // namespace
}  // namespace keel
