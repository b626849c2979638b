// The training jobs end to end: `keel datagen`, `keel launch --job=...` on a
// local cluster, `keel predict`.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "base/json_reader.h"
#include "test_util.h"
#ifdef KEEL_TESTS_CUDA_COMPILED
#include "worker/cuda_model.h"
#endif

namespace keel {
namespace {

using testing::KeelBinary;

using testing::Contains;
using testing::ExamplesPerEpoch;
using testing::ReadFileOrEmpty;
using testing::ReadMetrics;

class TrainingJob : public testing::TempFolderTest {
 public:
  TrainingJob() : TempFolderTest("train") {}

  void Generate(const std::string& model, int rows, int train_files) {
    const auto exit =
        testing::Run({KeelBinary(), "datagen", "--model=" + model, "--rows=" + std::to_string(rows),
                      "--features=2000", "--nnz=10", "--num_factors=4", "--seed=7",
                      "--train_files=" + std::to_string(train_files), "--out=" + folder_},
                     60);
    ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  }

  const std::string& dir() const { return folder_; }

  // Train with $TMPDIR set to `tmp` (made here), where default batch caches go.
  testing::Exit TrainWithTemporaryFolder(const std::string& tmp,
                                         const std::vector<std::string>& flags, int workers) {
    std::filesystem::create_directories(tmp);
    setenv("TMPDIR", tmp.c_str(), 1);
    testing::Exit exit = Train(flags, workers);
    unsetenv("TMPDIR");
    return exit;
  }

  testing::Exit Train(const std::vector<std::string>& flags, int workers, double timeout = 120) {
    std::vector<std::string> argv = {
        KeelBinary(), "launch", "--servers=2", "--workers=" + std::to_string(workers),
        "--train=" + folder_ + "/train", "--validation=" + folder_ + "/validation",
        "--test=" + folder_ + "/test", "--model_dir=" + folder_ + "/model", "--minloglevel=1",
        // Worker 0's own lines (epochs, metrics), read below.
        "--verbose"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return testing::Run(argv, timeout);
  }
};

// `keel predict` of `folder`/model on `folder`/`data`, writing
// `folder`/predictions.csv, with `flags` (bounded by 60 s).
testing::Exit Predict(const std::string& folder, const std::string& data,
                      const std::vector<std::string>& flags = {}) {
  std::vector<std::string> argv = {KeelBinary(), "predict", "--model_dir=" + folder + "/model",
                                   "--data=" + folder + "/" + data,
                                   "--out=" + folder + "/predictions.csv"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return testing::Run(argv, 60);
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
  const auto metrics = ReadMetrics(folder_ + "/model/metrics.json");
  const auto oracle = ReadMetrics(folder_ + "/oracle.json");
  ASSERT_TRUE(metrics.count("validation:roc_auc_score"))
      << ReadFileOrEmpty(folder_ + "/model/metrics.json");
  ASSERT_TRUE(metrics.count("test:roc_auc_score"));
  // Far better than chance, and not better than the planted model.
  EXPECT_GT(metrics.at("validation:roc_auc_score"),
            0.5 + 0.5 * (oracle.at("validation:roc_auc_score") - 0.5));
  EXPECT_LT(metrics.at("validation:roc_auc_score"), oracle.at("validation:roc_auc_score") + 0.01);
  EXPECT_GT(metrics.at("train:examples_per_second"), 0);
  // Better than a constant prediction of the training labels on both channels.
  EXPECT_EQ(metrics.at("trivial:validation:worse"), 0);
  EXPECT_EQ(metrics.at("trivial:test:worse"), 0);
  EXPECT_GT(metrics.at("trivial:test:objective_loss"), metrics.at("test:objective_loss"));
  EXPECT_EQ(exit.output.find("WARNING"), std::string::npos) << exit.output;

  const std::string predictions = folder_ + "/predictions.csv";
  const auto predict = Predict(folder_, "test");
  ASSERT_TRUE(predict.finished && predict.code == 0) << predict.output;
  EXPECT_EQ(testing::CountLines(ReadFileOrEmpty(predictions)), 4000u);
  // The artifact holds the same weights the job scored the test channel with.
  std::smatch auc;
  ASSERT_TRUE(std::regex_search(predict.output, auc, std::regex("roc_auc_score ([0-9.]+)")))
      << predict.output;
  EXPECT_NEAR(std::stod(auc[1]), metrics.at("test:roc_auc_score"), 1e-4);
}

// Runs keel datagen into `folder` with `flags` after the common ones (defined below).
testing::Exit RunDatagen(const std::string& folder, const std::vector<std::string>& flags);

// `keel predict`'s metric lines by name (defined below).
std::map<std::string, double> PredictMetrics(const std::string& output);

// `keel predict` of the model in `folder` on its `channel` scores `metric`
// within `tolerance` of what the job wrote to metrics.json (`trained`).
void ExpectPredictScoresAsTrained(const std::string& folder, const std::string& channel,
                                  const std::string& metric,
                                  const std::map<std::string, double>& trained, double tolerance) {
  const auto predict = Predict(folder, channel);
  ASSERT_TRUE(predict.finished && predict.code == 0) << predict.output;
  const auto scored = PredictMetrics(predict.output);
  ASSERT_TRUE(scored.count(metric)) << predict.output;
  EXPECT_NEAR(scored.at(metric), trained.at(channel + ":" + metric), tolerance);
}

// num_models: every model's figures in metrics.json and history.jsonl, the
// selected one the best on validation by the criterion (accuracy at its tuned
// threshold), and the artifact is that model alone: its own settings, and
// `keel predict` scores as the job's test channel was scored.
TEST_F(TrainingJob, SeveralModelsAreRecordedAndTheBestOnValidationIsKept) {
  Generate("linear", 20000, 2);
  const auto exit = Train({"--job=linear_learner", "--epochs=3", "--num_models=4"}, 2);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto metrics = ReadMetrics(folder_ + "/model/metrics.json");
  ASSERT_TRUE(metrics.count("train:selected_model"))
      << ReadFileOrEmpty(folder_ + "/model/metrics.json");
  const int selected = static_cast<int>(metrics.at("train:selected_model"));
  int best = 0;
  for (int k = 0; k < 4; ++k) {
    const std::string prefix = "model_" + std::to_string(k) + ":";
    for (const char* name : {"train:objective_loss", "validation:objective_loss",
                             "validation:roc_auc_score", "validation:accuracy"}) {
      EXPECT_TRUE(metrics.count(prefix + name)) << prefix + name;
    }
    if (metrics.at(prefix + "validation:accuracy") >
        metrics.at("model_" + std::to_string(best) + ":validation:accuracy")) {
      best = k;
    }
  }
  EXPECT_EQ(selected, best);
  const std::string chosen = "model_" + std::to_string(selected) + ":";
  EXPECT_EQ(metrics.at("validation:roc_auc_score"),
            metrics.at(chosen + "validation:roc_auc_score"));
  EXPECT_EQ(metrics.at("train:objective_loss"), metrics.at(chosen + "train:objective_loss"));
  // Every epoch's line names every model.
  const auto history = testing::ReadJsonLines(folder_ + "/model/history.jsonl");
  EXPECT_EQ(history.size(), 3u);
  for (const auto& line : history) {
    EXPECT_TRUE(line.count("model_3:train:objective_loss"));
    EXPECT_TRUE(line.count("train:selected_model"));
  }
  // model.json: which model of how many, with its own learning rate (model
  // 0's is the job's, 0.01 by default; the others' differ).
  const JsonValue model = ParseJson(ReadFileOrEmpty(folder_ + "/model/model.json"), "model.json");
  EXPECT_EQ(model.Find("trained_models")->AsNumber(), 4);
  EXPECT_EQ(model.Find("selected_model")->AsNumber(), selected);
  const double rate =
      model.Find("hyperparameters")->Find("weights_optimizer")->Find("learning_rate")->AsNumber();
  if (selected == 0) {
    EXPECT_NEAR(rate, 0.01, 1e-9);
  } else {
    EXPECT_GT(std::abs(rate - 0.01), 1e-4);
  }
  const auto predict = Predict(folder_, "test");
  ASSERT_TRUE(predict.finished && predict.code == 0) << predict.output;
  const auto scored = PredictMetrics(predict.output);
  EXPECT_NEAR(scored.at("roc_auc_score"), metrics.at("test:roc_auc_score"), 1e-6);
  EXPECT_NEAR(scored.at("binary_classification_accuracy"),
              metrics.at("test:binary_classification_accuracy"), 1e-6);
}

// The factorization machine trains with its own flags; model.json records
// every `auto` resolved (learning_rate, the groups' rates, gradient shaping)
// and the flags as given, and `keel predict` needs nothing else.
TEST_F(TrainingJob, FactorizationMachineTrainsEndToEnd) {
  Generate("fm", 20000, 2);
  const auto exit = Train(
      {"--job=factorization_machines", "--num_factors=4", "--epochs=3", "--factors_init_sigma=0.05",
       "--num_models=1", "--factors_lr=0.02", "--rescale_grad=0.5", "--clip_gradient=5"},
      2);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto metrics = ReadMetrics(folder_ + "/model/metrics.json");
  EXPECT_GT(metrics.at("validation:roc_auc_score"), 0.6);
  const std::string json = ReadFileOrEmpty(folder_ + "/model/model.json");
  auto model = testing::ParseJsonObject(json);
  EXPECT_EQ(model["job"], "factorization_machines") << json;
  EXPECT_EQ(model["num_factors"], "4") << json;

  const JsonValue document = ParseJson(json, "model.json");
  const JsonValue& weights = *document.Find("hyperparameters")->Find("weights_optimizer");
  EXPECT_EQ(weights.Find("name")->AsString(), "ftrl");              // auto for FM binary
  EXPECT_DOUBLE_EQ(weights.Find("learning_rate")->AsNumber(), 1);   // auto for ftrl
  EXPECT_DOUBLE_EQ(weights.Find("beta1")->AsNumber(), 0.9);         // auto
  EXPECT_DOUBLE_EQ(weights.Find("beta2")->AsNumber(), 0.999);       // auto
  EXPECT_DOUBLE_EQ(weights.Find("rescale_grad")->AsNumber(), 0.5);
  EXPECT_DOUBLE_EQ(weights.Find("clip_gradient")->AsNumber(), 5);
  const auto& groups = weights.Find("groups")->AsArray();
  ASSERT_EQ(groups.size(), 2u) << json;
  EXPECT_DOUBLE_EQ(groups[0].Find("learning_rate")->AsNumber(), 1);     // linear_lr auto
  EXPECT_DOUBLE_EQ(groups[1].Find("learning_rate")->AsNumber(), 0.02);  // factors_lr
  EXPECT_EQ(document.Find("flags")->Find("learning_rate")->AsString(), "auto");

  ExpectPredictScoresAsTrained(folder_, "test", "roc_auc_score", metrics, 1e-5);
}

TEST_F(TrainingJob, TheArtifactAndMetricsAreTheBestValidationEpochs) {
  Generate("fm", 20000, 2);
  // A rate this high overfits 20000 rows within a few epochs; patience lets
  // the job train past its best epoch.
  const auto exit =
      Train({"--job=factorization_machines", "--num_factors=4", "--epochs=5", "--optimizer=ftrl",
             "--learning_rate=10", "--bias_lr=1", "--factors_init_sigma=0.01",
             "--early_stopping_patience=5", "--early_stopping_tolerance=0", "--keep_best_epoch",
             // One synchronous worker: the same run every time (two asynchronous ones
             // need not overfit within 5 epochs every time).
             "--staleness=0"},
            1);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto metrics = ReadMetrics(folder_ + "/model/metrics.json");
  // The epoch with the lowest validation loss, from the per-epoch history.
  std::ifstream history(folder_ + "/model/history.jsonl");
  std::string line;
  int best_epoch = 0, epochs = 0;
  double best_loss = 1e30, best_auc = 0;
  while (std::getline(history, line)) {
    std::smatch loss, auc;
    ASSERT_TRUE(
        std::regex_search(line, loss, std::regex("\"validation:objective_loss\": ([-0-9.eE+]+)")));
    ASSERT_TRUE(
        std::regex_search(line, auc, std::regex("\"validation:roc_auc_score\": ([-0-9.eE+]+)")));
    ++epochs;
    if (std::stod(loss[1]) < best_loss) {
      best_loss = std::stod(loss[1]);
      best_auc = std::stod(auc[1]);
      best_epoch = epochs;
    }
  }
  ASSERT_EQ(epochs, 5);
  EXPECT_LT(best_epoch, epochs) << "the job did not overfit: the test shows nothing";
  EXPECT_EQ(metrics.at("train:best_epoch"), best_epoch);
  EXPECT_NEAR(metrics.at("validation:objective_loss"), best_loss, 1e-6);
  EXPECT_NEAR(metrics.at("validation:roc_auc_score"), best_auc, 1e-6);
  // The artifact holds that epoch's weights: scoring the validation channel
  // with it gives that epoch's figures.
  const auto predict = Predict(folder_, "validation");
  ASSERT_TRUE(predict.finished && predict.code == 0) << predict.output;
  std::smatch auc;
  ASSERT_TRUE(std::regex_search(predict.output, auc, std::regex("roc_auc_score ([0-9.]+)")))
      << predict.output;
  EXPECT_NEAR(std::stod(auc[1]), best_auc, 2e-4);
}

// The guard against a model no better than a constant: a factorization machine
// whose learning rate makes it diverge (its scores saturate, wrong half the
// time) ends with a warning naming the channels and the figures, in the
// summary and in metrics.json.
TEST_F(TrainingJob, ADivergedFactorizationMachineIsReportedWorseThanAConstantPrediction) {
  Generate("fm", 4000, 1);
  const auto exit = Train({"--job=factorization_machines", "--learning_rate=100000",
                           "--num_models=1", "--epochs=2", "--health_rules=off"},
                          2);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto metrics = ReadMetrics(folder_ + "/model/metrics.json");
  ASSERT_TRUE(metrics.count("trivial:test:worse")) << ReadFileOrEmpty(folder_ + "/model/metrics.json");
  EXPECT_GE(metrics.at("trivial:validation:worse"), 1);
  EXPECT_GE(metrics.at("trivial:test:worse"), 1);
  EXPECT_GT(metrics.at("test:objective_loss"), metrics.at("trivial:test:objective_loss"));
  EXPECT_NE(exit.output.find("WARNING      the model is worse on test than a constant prediction "
                             "of the training labels: "),
            std::string::npos)
      << exit.output;
  EXPECT_NE(exit.output.find("objective_loss"), std::string::npos);
}

TEST_F(TrainingJob, ABadRecordFailsTheJobNamingFileAndLineUnlessSkipped) {
  Generate("linear", 2000, 1);
  {
    std::ofstream bad(folder_ + "/train/part-0.libsvm", std::ios::app);
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

// Rewrites a 0/1 libsvm file with LIBLINEAR's -1/+1 labels.
void ToPlusMinusOneLabels(const std::string& path) {
  std::ifstream in(path);
  std::string line, rewritten;
  while (std::getline(in, line))
    rewritten += (line[0] == '0' ? "-1" : "+1") + line.substr(1) + "\n";
  in.close();
  std::ofstream(path) << rewritten;
}

TEST_F(TrainingJob, MinusOnePlusOneLabelsTrainAsZeroOne) {
  Generate("linear", 4000, 1);
  const std::vector<std::string> flags = {"--job=linear_learner", "--epochs=2", "--staleness=0"};
  auto exit = Train(flags, 1);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto zero_one = ReadMetrics(folder_ + "/model/metrics.json");
  for (const char* channel :
       {"/train/part-0.libsvm", "/validation/part-0.libsvm", "/test/part-0.libsvm"}) {
    ToPlusMinusOneLabels(folder_ + channel);
  }
  exit = Train(flags, 1);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto plus_minus_one = ReadMetrics(folder_ + "/model/metrics.json");
  for (const char* metric : {"validation:roc_auc_score", "validation:objective_loss",
                             "test:binary_classification_accuracy"}) {
    ASSERT_TRUE(plus_minus_one.count(metric)) << metric;
    EXPECT_NEAR(plus_minus_one.at(metric), zero_one.at(metric), 1e-6) << metric;
  }
}

TEST_F(TrainingJob, ADeeperPipelineKeepsTheStalenessBound) {
  // Each pull carries the clock of the minibatch that reads it: under
  // --staleness=0 a lone worker's minibatch sees every push before it however
  // many are pulled ahead, so depths 1, 2 and 3 train the same model to the
  // last digit (pulls stamped one clock early would read rows a push stale).
  Generate("linear", 4000, 1);
  const std::vector<std::string> flags = {"--job=linear_learner", "--epochs=2", "--staleness=0",
                                          "--mini_batch_size=100", "--num_models=1"};
  std::vector<std::map<std::string, double>> runs;
  for (const char* depth : {"1", "2", "3"}) {
    std::vector<std::string> with = flags;
    with.push_back(std::string("--minibatches_in_flight=") + depth);
    const auto exit = Train(with, 1);
    ASSERT_TRUE(exit.finished && exit.code == 0) << depth << ": " << exit.output;
    runs.push_back(ReadMetrics(folder_ + "/model/metrics.json"));
  }
  for (const char* metric : {"validation:objective_loss", "validation:roc_auc_score"}) {
    ASSERT_TRUE(runs[0].count(metric)) << metric;
    EXPECT_EQ(runs[1].at(metric), runs[0].at(metric)) << metric << ", depth 2";
    EXPECT_EQ(runs[2].at(metric), runs[0].at(metric)) << metric << ", depth 3";
  }
  // Bounded staleness with pulls further ahead than the bound: the pulls
  // wait at the servers for the worker's own pushes, and the job ends.
  std::vector<std::string> bounded = {"--job=linear_learner", "--epochs=2", "--staleness=1",
                                      "--mini_batch_size=100", "--minibatches_in_flight=4"};
  const auto exit = Train(bounded, 2);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
}

TEST_F(TrainingJob, ABadLabelFailsTheJobNamingFileLineAndValueUnlessSkipped) {
  Generate("linear", 2000, 1);
  { std::ofstream(folder_ + "/train/part-0.libsvm", std::ios::app) << "2 5:1\n"; }
  auto exit = Train({"--job=linear_learner", "--epochs=1"}, 1);
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(
      Contains(exit.output, "part-0.libsvm:2001: label 2 is not a binary label (0/1 or -1/+1)"))
      << exit.output;

  exit = Train({"--job=linear_learner", "--epochs=1", "--skip_bad_records"}, 1);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  EXPECT_EQ(ExamplesPerEpoch(exit.output), (std::vector<long>{2000})) << exit.output;
}

TEST_F(TrainingJob, ABadLabelOnAShardsLastLineFailsTheJobBeforeAnyMinibatch) {
  Generate("linear", 3000, 2);
  { std::ofstream(folder_ + "/train/part-1.libsvm", std::ios::app) << "7 5:1\n"; }
  const auto exit = Train({"--job=linear_learner", "--epochs=1", "--mini_batch_size=10"}, 2);
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(exit.output, "before the first minibatch: ")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "part-1.libsvm:1501: label 7 is not a binary label"))
      << exit.output;
}

TEST_F(TrainingJob, ABadLabelInTheValidationChannelFailsTheJob) {
  Generate("linear", 2000, 1);
  { std::ofstream(folder_ + "/validation/part-0.libsvm", std::ios::app) << "0.5 5:1\n"; }
  const auto exit = Train({"--job=linear_learner", "--epochs=1"}, 1);
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(
      Contains(exit.output, "validation/part-0.libsvm:201: label 0.5 is not a binary label"))
      << exit.output;
}

TEST_F(TrainingJob, AHealthyJobWritesTheHealthOfEveryTableEveryEpoch) {
  Generate("linear", 4000, 2);
  const auto exit = Train({"--job=linear_learner", "--epochs=2", "--mini_batch_size=100"}, 2);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const std::string history = ReadFileOrEmpty(folder_ + "/model/history.jsonl");
  const auto lines = testing::ReadJsonLines(folder_ + "/model/history.jsonl");
  ASSERT_EQ(lines.size(), 2u) << history;
  uint64_t rows_created = 0;
  for (const auto& line : lines) {
    ASSERT_TRUE(line.count("health")) << history;
    const JsonValue health = ParseJson(line.at("health"), "health");
    for (const char* table : {"weights", "bias"}) {
      const JsonValue* figures = health.Find(table);
      ASSERT_NE(figures, nullptr) << table << ": " << history;
      EXPECT_GT(figures->Find("weight_norm")->AsNumber(), 0) << table;
      EXPECT_GT(figures->Find("gradient_norm")->AsNumber(), 0) << table;
      EXPECT_EQ(figures->Find("nonfinite_share")->AsNumber(), 0) << table;
    }
    rows_created += health.Find("weights")->Find("rows_created")->AsUint64();
    // The bias's one row is made by the first push.
    EXPECT_EQ(health.Find("bias")->Find("rows_created")->AsUint64(),
              line.at("epoch") == "1" ? 1u : 0u);
  }
  // Every feature the data uses gets its row once (2000 features, 10 a row:
  // nearly all of them appear in 4000 rows), most of them in epoch 1.
  EXPECT_GT(rows_created, 1900u) << history;
  EXPECT_LE(rows_created, 2000u) << history;
  const auto metrics = ReadMetrics(folder_ + "/model/metrics.json");
  ASSERT_TRUE(metrics.count("health:weights:weight_norm"))
      << ReadFileOrEmpty(folder_ + "/model/metrics.json");
  EXPECT_GT(metrics.at("health:weights:weight_norm"), 0);
}

// Labels in the thousands, left unscaled, and plain SGD at a rate of 10:
// every step multiplies the bias's error by about -9. `exit` is the job's,
// on one worker, with `flags` besides.
void TrainDiverging(TrainingJob* job, const std::vector<std::string>& flags, testing::Exit* exit) {
  const auto generated = RunDatagen(
      job->dir(),
      {"--predictor_type=regressor", "--label_offset=5000", "--label_scale=1000", "--rows=4000"});
  ASSERT_TRUE(generated.finished && generated.code == 0) << generated.output;
  std::vector<std::string> all = {"--job=linear_learner",    "--predictor_type=regressor",
                                  "--normalize_label=false", "--optimizer=sgd",
                                  "--learning_rate=10",      "--use_lr_scheduler=false",
                                  "--num_models=1",          "--epochs=3",
                                  "--mini_batch_size=50"};
  all.insert(all.end(), flags.begin(), flags.end());
  *exit = job->Train(all, 1);
}

TEST_F(TrainingJob, ADivergingJobStopsNamingTheEpochTheTableAndTheFigure) {
  testing::Exit exit;
  ASSERT_NO_FATAL_FAILURE(TrainDiverging(this, {}, &exit));
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  std::smatch stop;
  ASSERT_TRUE(std::regex_search(exit.output, stop,
                                std::regex("training health: epoch 1, table (weights|bias): "
                                           "(train:objective_loss|nonfinite_share|gradient_norm) "
                                           "[^ ]+")))
      << exit.output;
  // The job stopped there: no epoch was recorded after it.
  EXPECT_FALSE(Contains(ReadFileOrEmpty(folder_ + "/model/history.jsonl"), "\"epoch\": 2"));
}

TEST_F(TrainingJob, WithHealthRulesOffTheDivergingJobGoesOnUntilAServerRefusesAPush) {
  testing::Exit exit;
  ASSERT_NO_FATAL_FAILURE(TrainDiverging(this, {"--health_rules=off"}, &exit));
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_FALSE(Contains(exit.output, "training health:")) << exit.output;
  // What stops it instead, later and less clearly: an infinity reaches a push.
  EXPECT_TRUE(Contains(exit.output, "has a non-finite value")) << exit.output;
}

TEST_F(TrainingJob, OfSeveralModelsThoseThatDivergeAreLeftOutAndTheOthersEndTheJob) {
  // At a base rate of 1 the models whose rates the spread raises past about
  // 2 diverge (model_variants.h); the rest converge.
  testing::Exit exit;
  ASSERT_NO_FATAL_FAILURE(TrainDiverging(this, {"--learning_rate=1", "--num_models=8"}, &exit));
  ASSERT_TRUE(exit.finished);
  EXPECT_EQ(exit.code, 0) << exit.output;
  std::set<int> left_out;
  const std::regex left("model ([0-9]) is left out from here on");
  for (std::sregex_iterator it(exit.output.begin(), exit.output.end(), left), end; it != end;
       ++it) {
    left_out.insert(std::stoi((*it)[1]));
  }
  EXPECT_FALSE(left_out.empty()) << exit.output;
  EXPECT_LT(left_out.size(), 8u) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "(exploding gradient); model ")) << exit.output;
  const auto metrics = ReadMetrics(folder_ + "/model/metrics.json");
  ASSERT_TRUE(metrics.count("train:selected_model")) << exit.output;
  EXPECT_EQ(left_out.count(static_cast<int>(metrics.at("train:selected_model"))), 0u)
      << exit.output;
}

// Runs keel datagen into folder_ with `flags` after the common ones.
testing::Exit RunDatagen(const std::string& folder, const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {KeelBinary(), "datagen",  "--rows=10000",   "--features=1000",
                                   "--nnz=10",   "--seed=3", "--out=" + folder};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return testing::Run(argv, 60);
}

TEST_F(TrainingJob, DatagenRegressionSetHasItsOracleAndTrains) {
  const auto generated =
      RunDatagen(folder_, {"--predictor_type=regressor", "--label_offset=150", "--label_scale=60"});
  ASSERT_TRUE(generated.finished && generated.code == 0) << generated.output;
  const auto oracle = ReadMetrics(folder_ + "/oracle.json");
  ASSERT_TRUE(oracle.count("validation:mse")) << ReadFileOrEmpty(folder_ + "/oracle.json");
  EXPECT_NEAR(oracle.at("validation:mse"), 60 * 60, 0.15 * 60 * 60);  // the noise's variance
  const auto exit = Train({"--job=linear_learner", "--predictor_type=regressor", "--epochs=2"}, 2);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto metrics = ReadMetrics(folder_ + "/model/metrics.json");
  ASSERT_TRUE(metrics.count("validation:mse")) << exit.output;
  EXPECT_GT(metrics.at("validation:mse"), 0.9 * oracle.at("validation:mse"));
}

// Labels in the hundreds train as (label - mean) / deviation and come back on
// their scale (without normalisation this job ends near 7 times the oracle's
// MSE). 4 x 10^4 rows: with 10^3 weights least squares itself pays about
// p/n = 2.5% over the oracle. One worker: two asynchronous workers' stale
// Adam steps add about 10% (the staleness work of issue 14).
TEST_F(TrainingJob, RegressionWithOffsetLabelsNearsTheOracleWithDefaultFlags) {
  const auto generated = RunDatagen(folder_, {"--rows=40000", "--predictor_type=regressor",
                                              "--label_offset=150", "--label_scale=60"});
  ASSERT_TRUE(generated.finished && generated.code == 0) << generated.output;
  const auto oracle = ReadMetrics(folder_ + "/oracle.json");
  const auto exit = Train({"--job=linear_learner", "--predictor_type=regressor"}, 1);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto metrics = ReadMetrics(folder_ + "/model/metrics.json");
  ASSERT_TRUE(metrics.count("validation:mse")) << exit.output;
  EXPECT_LT(metrics.at("validation:mse"), 1.1 * oracle.at("validation:mse"));
}

// The statistics are folded into the artifact: predict, on raw data and with
// no flag but the model, reproduces the job's test MSE on the original scale
// (features scaled over two decades, labels offset and scaled; centring is
// folded in the unit tests).
void ExpectPredictReproducesTestMse(TrainingJob* job, const std::vector<std::string>& flags) {
  const auto exit = job->Train(flags, 1);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto metrics = ReadMetrics(job->dir() + "/model/metrics.json");
  ASSERT_TRUE(metrics.count("test:mse")) << exit.output;
  EXPECT_LT(metrics.at("test:mse"), 2 * 60 * 60 * 2) << "near the label's variance or below";
  const auto predict = Predict(job->dir(), "test");
  ASSERT_TRUE(predict.finished && predict.code == 0) << predict.output;
  std::smatch mse;
  ASSERT_TRUE(std::regex_search(predict.output, mse, std::regex("[^r]mse ([0-9.]+)")))
      << predict.output;
  EXPECT_NEAR(std::stod(mse[1]), metrics.at("test:mse"), 1e-3 * metrics.at("test:mse"));
}

TEST_F(TrainingJob, PredictOfANormalisedFactorizationMachineReproducesItsTestMse) {
  const auto generated =
      RunDatagen(dir(), {"--model=fm", "--num_factors=4", "--predictor_type=regressor",
                         "--label_offset=150", "--label_scale=60", "--feature_scale_spread=2"});
  ASSERT_TRUE(generated.finished && generated.code == 0) << generated.output;
  ExpectPredictReproducesTestMse(
      this, {"--job=factorization_machines", "--predictor_type=regressor", "--num_factors=4",
             "--epochs=2"});
}

// A feature seen only in validation: the job's validation figures are the
// artifact's, which gives it no weight, as `keel predict` does (validation
// scored the servers' weights without statistics to fold, and the servers
// gave such a feature a row of random initial factors).
TEST_F(TrainingJob, AFeatureSeenOnlyInValidationScoresAsPredictScoresIt) {
  Generate("fm", 4000, 1);
  const std::string validation =
      std::filesystem::directory_iterator(folder_ + "/validation")->path().string();
  std::ifstream in(validation);
  std::string rows, line;
  while (std::getline(in, line)) rows += line + " 2001:3\n";  // datagen's features are 1..2000
  in.close();
  std::ofstream(validation) << rows;
  const auto exit = Train({"--job=factorization_machines", "--normalize_data=false",
                           "--frequency_prior=0", "--factors_init_sigma=0.5", "--epochs=1",
                           "--num_models=1"},
                          1);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto metrics = ReadMetrics(folder_ + "/model/metrics.json");
  ASSERT_TRUE(metrics.count("validation:objective_loss")) << exit.output;
  ExpectPredictScoresAsTrained(folder_, "validation", "objective_loss", metrics, 1e-5);
}

// One data set with dense features around offsets of several decades (as a
// blood pressure beside a count), written as libsvm (zeros left out), CSV
// (every zero written) and sparse recordIO: each job, defaults only, trains
// models within noise of each other on the three, the same features centred.
TEST_F(TrainingJob, TheSameRowsAsLibsvmCsvAndRecordIOTrainTheSameModels) {
  const std::vector<std::string> formats = {"libsvm", "csv", "recordio-protobuf"};
  for (const std::string& format : formats) {
    const auto made = testing::Run({KeelBinary(), "datagen", "--model=linear", "--rows=6000",
                                    "--features=200", "--nnz=6", "--dense_features=6", "--seed=7",
                                    "--data_format=" + format, "--out=" + folder_ + "/" + format},
                                   60);
    ASSERT_TRUE(made.finished && made.code == 0) << format << ": " << made.output;
  }
  const std::regex centred("\"centred_features\":([0-9]+)");
  for (const char* job : {"linear_learner", "factorization_machines"}) {
    std::vector<std::map<std::string, double>> runs;
    std::vector<std::string> centred_counts;
    for (const std::string& format : formats) {
      const std::string data = folder_ + "/" + format;
      const std::string model = folder_ + "/model-" + job + "-" + format;
      const auto exit =
          testing::Run({KeelBinary(), "launch", "--servers=1", "--workers=1",
                        std::string("--job=") + job, "--feature_dim=206",
                        "--train=" + data + "/train", "--validation=" + data + "/validation",
                        "--model_dir=" + model, "--progress=none", "--metrics=off"},
                       120);
      ASSERT_TRUE(exit.finished && exit.code == 0) << job << " " << format << ": " << exit.output;
      runs.push_back(ReadMetrics(model + "/metrics.json"));
      std::smatch found;
      const std::string artifact = ReadFileOrEmpty(model + "/model.json");
      ASSERT_TRUE(std::regex_search(artifact, found, centred)) << job << " " << format;
      centred_counts.push_back(found[1]);
    }
    // The same features centred in every format, the 6 dense ones at least
    // (a feature in half the rows or more is centred).
    EXPECT_EQ(centred_counts, std::vector<std::string>(3, centred_counts[0])) << job;
    EXPECT_GE(std::stoi(centred_counts[0]), 6) << job;
    const double oracle = ReadMetrics(folder_ + "/csv/oracle.json").at("validation:roc_auc_score");
    for (size_t k = 0; k < runs.size(); ++k) {
      const double auc = runs[k].at("validation:roc_auc_score");
      EXPECT_GT(auc, oracle - 0.04) << job << " " << formats[k];  // it learned
      EXPECT_NEAR(auc, runs[0].at("validation:roc_auc_score"), 0.002) << job << " " << formats[k];
      EXPECT_NEAR(runs[k].at("validation:objective_loss"), runs[0].at("validation:objective_loss"),
                  0.005 * runs[0].at("validation:objective_loss"))
          << job << " " << formats[k];
    }
  }
}

// A model scores rows in another format than it trained on: predict reads
// the data's own format when --data_format is not given (it read the model's,
// and a CSV row failed as a libsvm label), and says so.
TEST_F(TrainingJob, PredictReadsTheDatasFormatNotTheModels) {
  Generate("linear", 4000, 1);
  const auto exit = Train({"--job=linear_learner", "--epochs=1"}, 1);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  // The first 50 test rows as CSV: 2,000 columns, zeros written.
  std::ifstream libsvm(std::filesystem::directory_iterator(folder_ + "/test")->path());
  ASSERT_TRUE(libsvm) << folder_ << "/test holds no file";
  std::ofstream csv(folder_ + "/test.csv");
  std::ofstream head(folder_ + "/test-head");
  std::string line;
  for (int row = 0; row < 50 && std::getline(libsvm, line); ++row) {
    head << line << "\n";
    std::istringstream tokens(line);
    std::string label, pair;
    tokens >> label;
    std::vector<std::string> columns(2000, "0");
    while (tokens >> pair) {
      const size_t colon = pair.find(':');
      columns[std::stoul(pair.substr(0, colon)) - 1] = pair.substr(colon + 1);
    }
    csv << label;
    for (const std::string& column : columns) csv << "," << column;
    csv << "\n";
  }
  csv.close();
  head.close();
  const auto from_csv = Predict(folder_, "test.csv");
  ASSERT_TRUE(from_csv.finished && from_csv.code == 0) << from_csv.output;
  EXPECT_NE(from_csv.output.find("so the data is read as csv (the model trained on libsvm data)"),
            std::string::npos)
      << from_csv.output;
  const std::string csv_scores = ReadFileOrEmpty(folder_ + "/predictions.csv");
  const auto from_libsvm = Predict(folder_, "test-head");
  ASSERT_TRUE(from_libsvm.finished && from_libsvm.code == 0) << from_libsvm.output;
  EXPECT_EQ(from_libsvm.output.find("the model trained on"), std::string::npos);
  EXPECT_EQ(csv_scores, ReadFileOrEmpty(folder_ + "/predictions.csv"));
  EXPECT_EQ(testing::CountLines(csv_scores), 50u);
}

// Each worker logs the statistics it computed; with a sample every worker
// reads alike they are the same text on both.
TEST_F(TrainingJob, EveryWorkerTrainsWithTheSameDataStatistics) {
  const auto generated = RunDatagen(folder_, {"--predictor_type=regressor", "--label_offset=150",
                                              "--label_scale=60", "--feature_scale_spread=4"});
  ASSERT_TRUE(generated.finished && generated.code == 0) << generated.output;
  const auto exit = Train(
      {"--job=linear_learner", "--predictor_type=regressor", "--epochs=1", "--minloglevel=0"}, 2);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  std::map<std::string, std::string> statistics;  // worker -> its statistics
  const std::regex line("worker ([0-9]+): data statistics (\\{[^}]*\\})");
  for (auto it = std::sregex_iterator(exit.output.begin(), exit.output.end(), line);
       it != std::sregex_iterator(); ++it) {
    statistics[(*it)[1]] = (*it)[2];
  }
  ASSERT_EQ(statistics.size(), 2u) << exit.output;
  EXPECT_EQ(statistics["0"], statistics["1"]);
  EXPECT_NE(statistics["0"].find("\"label_offset\":1"), std::string::npos) << statistics["0"];
}

TEST_F(TrainingJob, DatagenMulticlassSetHasItsOracleAndTrains) {
  const auto generated =
      RunDatagen(folder_, {"--predictor_type=multiclass_classifier", "--num_classes=5"});
  ASSERT_TRUE(generated.finished && generated.code == 0) << generated.output;
  const auto oracle = ReadMetrics(folder_ + "/oracle.json");
  ASSERT_TRUE(oracle.count("validation:multiclass_accuracy"))
      << ReadFileOrEmpty(folder_ + "/oracle.json");
  EXPECT_GT(oracle.at("validation:multiclass_accuracy"), 0.25);  // chance: 1/5
  const auto exit = Train({"--job=linear_learner", "--predictor_type=multiclass_classifier",
                           "--num_classes=5", "--epochs=3"},
                          2);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto metrics = ReadMetrics(folder_ + "/model/metrics.json");
  ASSERT_TRUE(metrics.count("validation:multiclass_accuracy")) << exit.output;
  EXPECT_GT(metrics.at("validation:multiclass_accuracy"), 0.2);
  EXPECT_LT(metrics.at("validation:multiclass_accuracy"),
            oracle.at("validation:multiclass_accuracy") + 0.03);
}

TEST_F(TrainingJob, DatagenNumClassesWithoutMulticlassFailsNamingTheFlag) {
  const auto generated = RunDatagen(folder_, {"--num_classes=10"});
  ASSERT_TRUE(generated.finished);
  EXPECT_NE(generated.code, 0);
  EXPECT_TRUE(Contains(generated.output, "--num_classes 10 needs --predictor_type"))
      << generated.output;
}

// Writes `rows` examples of a rule a linear model can learn: feature f in
// 0..9 present with value 1; the target depends on which are present.
void WriteRuleData(const std::string& path, int rows, bool multiclass, uint64_t seed) {
  std::ofstream out(path);
  std::mt19937_64 random(seed);
  for (int r = 0; r < rows; ++r) {
    std::vector<int> present;
    for (int f = 0; f < 10; ++f) {
      if (random() % 3 == 0) present.push_back(f);
    }
    if (present.empty()) present.push_back(static_cast<int>(random() % 10));
    double target = 0;
    int best = present[0];
    for (int f : present) {
      target += (f % 2 ? 1.5 : -0.5);
      best = std::max(best, f);
    }
    if (multiclass) {
      out << best % 3;  // the class follows the largest feature present
    } else {
      out << target + 0.1 * (static_cast<double>(random() % 1000) / 1000 - 0.5);
    }
    for (int f : present) out << " " << f + 1 << ":1";
    out << "\n";
  }
}

// Writes the rule data of WriteRuleData, `rows` rows, to each of `channels`
// (folders of one file).
void WriteRuleChannels(const std::string& folder, const std::vector<std::string>& channels,
                       bool multiclass, int rows = 2000) {
  for (const std::string& channel : channels) {
    ASSERT_EQ(mkdir((folder + "/" + channel).c_str(), 0755), 0);
    WriteRuleData(folder + "/" + channel + "/part-0.libsvm", rows, multiclass, channel[0]);
  }
}

// The rule data of WriteRuleData, 4000 rows, in `folder`'s train and
// validation channels, and `keel launch` of a linear learner with `servers`
// servers and `workers` workers on them (10 epochs of minibatches of 50), its
// model in `folder`/model, with `flags` (bounded by 120 s): `exit` and `metrics` (metrics.json) are
// the job's, and it fails the test unless the job succeeded and `metric` is one of its metrics.
void TrainOnRules(const std::string& folder, bool multiclass, int servers, int workers,
                  const std::vector<std::string>& flags, const std::string& metric,
                  testing::Exit* exit, std::map<std::string, double>* metrics) {
  ASSERT_NO_FATAL_FAILURE(WriteRuleChannels(folder, {"train", "validation"}, multiclass, 4000));
  std::vector<std::string> argv = testing::LaunchCommand(
      servers, workers,
      {"--job=linear_learner", "--train=" + folder + "/train",
       "--validation=" + folder + "/validation", "--model_dir=" + folder + "/model", "--epochs=10",
       "--mini_batch_size=50", "--minloglevel=1"});
  argv.insert(argv.end(), flags.begin(), flags.end());
  *exit = testing::Run(argv, 120);
  ASSERT_TRUE(exit->finished && exit->code == 0) << exit->output;
  *metrics = ReadMetrics(folder + "/model/metrics.json");
  ASSERT_TRUE(metrics->count(metric)) << ReadFileOrEmpty(folder + "/model/metrics.json");
}

TEST_F(TrainingJob, RegressorLearnsARule) {
  testing::Exit exit;
  std::map<std::string, double> metrics;
  ASSERT_NO_FATAL_FAILURE(TrainOnRules(folder_, false, 1, 2,
                                       {"--predictor_type=regressor", "--learning_rate=0.01"},
                                       "validation:mse", &exit, &metrics));
  EXPECT_TRUE(metrics.count("validation:absolute_loss"));
  EXPECT_TRUE(metrics.count("validation:rmse"));
  // The targets vary by about 1.3 (standard deviation); a learned model is far closer.
  EXPECT_LT(metrics.at("validation:mse"), 0.05) << exit.output;
}

// absolute_loss: the validation objective_loss is the mean absolute error,
// computed as the training loss, and model.json records the loss.
TEST_F(TrainingJob, RegressorLearnsARuleUnderAbsoluteLoss) {
  testing::Exit exit;
  std::map<std::string, double> metrics;
  ASSERT_NO_FATAL_FAILURE(
      TrainOnRules(folder_, false, 1, 1,
                   {"--predictor_type=regressor", "--loss=absolute_loss", "--learning_rate=0.01"},
                   "validation:absolute_loss", &exit, &metrics));
  // The targets vary by about 1.3 (standard deviation) around the rule, with
  // noise of at most 0.05: a learned model's absolute error is far below 1.
  EXPECT_LT(metrics.at("validation:absolute_loss"), 0.15) << exit.output;
  EXPECT_NEAR(metrics.at("validation:objective_loss"), metrics.at("validation:absolute_loss"),
              1e-4 * metrics.at("validation:absolute_loss"));
  EXPECT_TRUE(
      Contains(ReadFileOrEmpty(folder_ + "/model/model.json"), "\"loss\":\"absolute_loss\""));
}

TEST_F(TrainingJob, ALossThatDoesNotFitThePredictorTypeFailsAtStartNamingBoth) {
  Generate("linear", 100, 1);
  const auto exit =
      Train({"--job=linear_learner", "--predictor_type=regressor", "--loss=hinge_loss"}, 1, 30);
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(exit.output, "--loss hinge_loss does not fit --predictor_type regressor"))
      << exit.output;
}

TEST_F(TrainingJob, MulticlassClassifierBeatsChance) {
  testing::Exit exit;
  std::map<std::string, double> metrics;
  ASSERT_NO_FATAL_FAILURE(TrainOnRules(
      folder_, true, 2, 2,
      {"--predictor_type=multiclass_classifier", "--num_classes=3", "--learning_rate=0.05"},
      "validation:multiclass_accuracy", &exit, &metrics));
  EXPECT_GT(metrics.at("validation:multiclass_accuracy"), 0.6);  // chance is about 1/3
  const std::string predictions = folder_ + "/predictions.csv";
  const auto predict = Predict(folder_, "validation");
  ASSERT_TRUE(predict.finished && predict.code == 0) << predict.output;
  std::ifstream in(predictions);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(std::count(first.begin(), first.end(), ','), 3) << first;  // label, 3 probabilities
}

// `keel predict`'s metric lines ("  NAME VALUE") by name.
std::map<std::string, double> PredictMetrics(const std::string& output) {
  std::map<std::string, double> metrics;
  const std::regex line("^  ([a-z_]+) ([-+0-9.eE]+|nan|inf)$");
  std::istringstream lines(output);
  for (std::string text; std::getline(lines, text);) {
    std::smatch match;
    if (std::regex_match(text, match, line)) metrics[match[1]] = std::stod(match[2]);
  }
  return metrics;
}

// A regressor trained under absolute_loss on 0-based libsvm indices: predict
// given nothing but the model, the data and the output reads the data as the
// job did and scores with the job's loss, so it reports the trainer's test
// metrics (objective_loss included, which is the absolute loss's).
TEST_F(TrainingJob, PredictNeedsOnlyTheModelTheDataAndTheOutput) {
  WriteRuleChannels(folder_, {"train", "validation", "test"}, false);
  const auto exit =
      Train({"--job=linear_learner", "--predictor_type=regressor", "--loss=absolute_loss",
             "--libsvm_zero_based", "--epochs=3", "--learning_rate=0.01", "--mini_batch_size=50"},
            1);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto trained = ReadMetrics(folder_ + "/model/metrics.json");
  const auto predict = Predict(folder_, "test");
  ASSERT_TRUE(predict.finished && predict.code == 0) << predict.output;
  const auto scored = PredictMetrics(predict.output);
  ASSERT_TRUE(scored.count("objective_loss")) << predict.output;
  for (const auto& [name, value] : scored) {
    ASSERT_TRUE(trained.count("test:" + name)) << name;
    // predict prints 6 significant digits.
    EXPECT_NEAR(value, trained.at("test:" + name), 1e-5 * (1 + std::fabs(value))) << name;
  }
  EXPECT_NEAR(scored.at("objective_loss"), scored.at("absolute_loss"), 1e-5);
}

// A line of a predictions file: "LABEL,SCORE" (the score a margin or a
// probability).
struct Prediction {
  std::string line;
  int label;
  double score;
};

// The lines of predictions file `path`; fails the test at a line without a
// comma.
void ReadPredictions(const std::string& path, std::vector<Prediction>* predictions) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const size_t comma = line.find(',');
    ASSERT_NE(comma, std::string::npos) << line;
    predictions->push_back(
        {line, std::stoi(line.substr(0, comma)), std::stod(line.substr(comma + 1))});
  }
}

// A hinge_loss classifier's scores are margins: predict labels an example by
// the sign of its margin, as the trainer's metrics do (the threshold left at
// its default, 0, by the loss_function criterion).
TEST_F(TrainingJob, PredictLabelsAHingeLossModelsExamplesByTheSignOfTheMargin) {
  Generate("linear", 4000, 1);
  const auto exit = Train({"--job=linear_learner", "--loss=hinge_loss", "--epochs=2",
                           "--binary_classifier_model_selection_criteria=loss_function"},
                          1);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto predict = Predict(folder_, "test");
  ASSERT_TRUE(predict.finished && predict.code == 0) << predict.output;
  std::vector<Prediction> predictions;
  ASSERT_NO_FATAL_FAILURE(ReadPredictions(folder_ + "/predictions.csv", &predictions));
  size_t positive_below_one_half = 0;
  for (const auto& [line, label, margin] : predictions) {
    EXPECT_EQ(label, margin >= 0 ? 1 : 0) << line;
    if (margin >= 0 && margin < 0.5) ++positive_below_one_half;
  }
  EXPECT_EQ(predictions.size(), 400u);
  EXPECT_GT(positive_below_one_half, 0u) << "no margin tells 0 from 0.5 apart";
  const auto trained = ReadMetrics(folder_ + "/model/metrics.json");
  EXPECT_NEAR(PredictMetrics(predict.output).at("binary_classification_accuracy"),
              trained.at("test:binary_classification_accuracy"), 1e-5);
}

// Rewrites the libsvm file `libsvm` (1-based indices 1..10) as dense csv
// (label, then columns 1..10), the same examples in another format.
void WriteAsCsv(const std::string& libsvm, const std::string& csv) {
  std::ifstream in(libsvm);
  std::ofstream out(csv);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string label, pair;
    fields >> label;
    std::vector<std::string> columns(10, "0");
    while (fields >> pair) columns[std::stoi(pair.substr(0, pair.find(':'))) - 1] = "1";
    out << label;
    for (const std::string& column : columns) out << "," << column;
    out << "\n";
  }
}

TEST_F(TrainingJob, PredictTakesAnExplicitDataFormatOverTheModels) {
  WriteRuleChannels(folder_, {"train", "validation", "test"}, false);
  const auto exit = Train({"--job=linear_learner", "--predictor_type=regressor", "--epochs=2",
                           "--learning_rate=0.01", "--mini_batch_size=50"},
                          1);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  WriteAsCsv(folder_ + "/test/part-0.libsvm", folder_ + "/test.csv");
  const auto predict = Predict(folder_, "test.csv", {"--data_format=csv"});
  ASSERT_TRUE(predict.finished && predict.code == 0) << predict.output;
  const auto trained = ReadMetrics(folder_ + "/model/metrics.json");
  const double mse = PredictMetrics(predict.output).at("mse");
  EXPECT_NEAR(mse, trained.at("test:mse"), 1e-5 * (1 + mse));
}

TEST_F(TrainingJob, PredictRefusesAPredictorTypeTheModelWasNotTrainedFor) {
  Generate("linear", 1000, 1);
  const auto exit = Train({"--job=linear_learner", "--epochs=1"}, 1);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto predict = Predict(folder_, "test", {"--predictor_type=regressor"});
  ASSERT_TRUE(predict.finished);
  EXPECT_NE(predict.code, 0);
  EXPECT_TRUE(Contains(predict.output, "--predictor_type regressor contradicts the model in " +
                                           folder_ + "/model (binary_classifier)"))
      << predict.output;
}

TEST_F(TrainingJob, MulticlassMetricsCarrySageMakersNames) {
  WriteRuleChannels(folder_, {"train", "validation", "test"}, true);
  const auto exit =
      Train({"--job=linear_learner", "--predictor_type=multiclass_classifier", "--num_classes=3",
             "--epochs=2", "--learning_rate=0.05", "--mini_batch_size=50", "--accuracy_top_k=1"},
            2);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto metrics = ReadMetrics(folder_ + "/model/metrics.json");
  for (const char* channel : {"validation:", "test:"}) {
    for (const char* name : {"objective_loss", "multiclass_accuracy", "multiclass_top_k_accuracy",
                             "dcg", "macro_precision", "macro_recall", "macro_f_beta"}) {
      EXPECT_EQ(metrics.count(channel + std::string(name)), 1u)
          << channel << name << " in " << ReadFileOrEmpty(folder_ + "/model/metrics.json");
    }
  }
  EXPECT_EQ(metrics.count("train:objective_loss"), 1u);
  // With --accuracy_top_k=1 top-k accuracy is plain accuracy.
  EXPECT_EQ(metrics.at("validation:multiclass_top_k_accuracy"),
            metrics.at("validation:multiclass_accuracy"));
  // The console uses the same names.
  EXPECT_TRUE(Contains(exit.output, "validation:macro_f_beta ")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "train:objective_loss ")) << exit.output;
}

TEST_F(TrainingJob, TrainObjectiveLossIsEachEpochsMeanLossPerExample) {
  WriteRuleChannels(folder_, {"train"}, true);
  // A rate this small leaves every weight at zero in float: each example's
  // softmax loss over 3 classes is log 3, and so is the mean, on any number of
  // workers and minibatches. A sum, or a mean of minibatch sums, would not be.
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=1", "--workers=2", "--job=linear_learner",
       "--predictor_type=multiclass_classifier", "--num_classes=3", "--optimizer=sgd",
       "--learning_rate=1e-30", "--mini_batch_size=64", "--epochs=2",
       "--train=" + folder_ + "/train", "--model_dir=" + folder_ + "/model", "--minloglevel=1"},
      120);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  // One history line per epoch, even without a validation channel.
  const auto history = testing::ReadJsonLines(folder_ + "/model/history.jsonl");
  ASSERT_EQ(history.size(), 2u) << ReadFileOrEmpty(folder_ + "/model/history.jsonl");
  for (const auto& epoch : history) {
    EXPECT_NEAR(std::stod(epoch.at("train:objective_loss")), std::log(3.0), 1e-5);
  }
  EXPECT_NEAR(ReadMetrics(folder_ + "/model/metrics.json").at("train:objective_loss"),
              std::log(3.0), 1e-5);
}

TEST_F(TrainingJob, FactorizationMachineReportsBinaryClassificationCrossEntropy) {
  Generate("fm", 4000, 2);
  // Factors and weights start at zero and barely move: every probability is
  // 1/2, so the cross-entropy is log 2.
  const auto exit =
      Train({"--job=factorization_machines", "--num_factors=4", "--epochs=1", "--optimizer=sgd",
             "--learning_rate=1e-30", "--factors_init_method=constant", "--factors_init_value=0"},
            2);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto metrics = ReadMetrics(folder_ + "/model/metrics.json");
  ASSERT_EQ(metrics.count("validation:binary_classification_cross_entropy"), 1u)
      << ReadFileOrEmpty(folder_ + "/model/metrics.json");
  EXPECT_NEAR(metrics.at("validation:binary_classification_cross_entropy"), std::log(2.0), 1e-5);
  EXPECT_NEAR(metrics.at("test:binary_classification_cross_entropy"), std::log(2.0), 1e-5);
}

// Trains with a straggler (worker 1 three times slower) under `staleness`.
std::map<std::string, double> TrainWithStraggler(TrainingJob* job, const std::string& staleness) {
  const auto exit = job->Train({"--job=linear_learner", "--epochs=2", "--mini_batch_size=100",
                                "--staleness=" + staleness, "--slow_worker=1:3"},
                               3);
  EXPECT_TRUE(exit.finished && exit.code == 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "staleness gate (" + staleness + ")")) << exit.output;
  return ReadMetrics(job->dir() + "/model/metrics.json");
}

TEST_F(TrainingJob, BulkSynchronousNeverAnswersAPullAheadOfTheSlowestWorker) {
  Generate("linear", 6000, 3);
  const auto metrics = TrainWithStraggler(this, "0");
  ASSERT_TRUE(metrics.count("train:max_staleness"));
  EXPECT_EQ(metrics.at("train:max_staleness"), 0);
  EXPECT_GT(metrics.at("train:parked_pulls"), 0) << "the gate never engaged";
  EXPECT_GT(metrics.at("train:pull_hold_seconds"), 0);
}

TEST_F(TrainingJob, BoundedStalenessKeepsPullsWithinTheBound) {
  Generate("linear", 6000, 3);
  const auto metrics = TrainWithStraggler(this, "2");
  ASSERT_TRUE(metrics.count("train:max_staleness"));
  EXPECT_LE(metrics.at("train:max_staleness"), 2);
  EXPECT_GT(metrics.at("train:parked_pulls"), 0) << "the gate never engaged";
}

TEST_F(TrainingJob, AsynchronousTrainingNeverParksAPull) {
  Generate("linear", 6000, 3);
  const auto metrics = TrainWithStraggler(this, "inf");
  ASSERT_TRUE(metrics.count("train:parked_pulls"));
  EXPECT_EQ(metrics.at("train:parked_pulls"), 0);
  EXPECT_GT(metrics.at("train:pulls"), 0);
  // Without the gate the fast workers do run ahead of the straggler.
  EXPECT_GT(metrics.at("train:max_staleness"), 2);
}

TEST_F(TrainingJob, BadHyperparametersFailAtStartNamingTheFlag) {
  Generate("linear", 100, 1);
  const auto exit = Train({"--job=linear_learner", "--predictor_type=ranker"}, 1, 30);
  ASSERT_TRUE(exit.finished);
  EXPECT_NE(exit.code, 0);
  EXPECT_TRUE(Contains(exit.output, "--predictor_type 'ranker'")) << exit.output;
}

// One worker and one server see the same requests in the same order whatever
// the worker's thread count, and the threaded CPU pass is bitwise the
// one-thread pass on sparse data: the two models are byte for byte the same.
TEST_F(TrainingJob, FourThreadsTrainTheSameModelAsOne) {
  Generate("fm", 3000, 1);
  std::string weights[2];
  for (int threads : {1, 4}) {
    const auto exit = testing::Run(
        {KeelBinary(), "launch", "--servers=1", "--workers=1", "--job=factorization_machines",
         "--epochs=2", "--mini_batch_size=200", "--train=" + folder_ + "/train",
         "--model_dir=" + folder_ + "/model-" + std::to_string(threads),
         "--threads=" + std::to_string(threads), "--minloglevel=1"},
        120);
    ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
    weights[threads == 1 ? 0 : 1] =
        ReadFileOrEmpty(folder_ + "/model-" + std::to_string(threads) + "/weights.bin");
  }
  ASSERT_FALSE(weights[0].empty());
  EXPECT_TRUE(weights[0] == weights[1]) << "the models differ";
}

// On a machine without a usable GPU (this one, in CI), a worker asked for one
// fails before joining, saying why; the launcher stops the job.
TEST_F(TrainingJob, ACudaDeviceWithoutAGpuFailsAtStartSayingWhy) {
#ifdef KEEL_TESTS_CUDA_COMPILED
  std::string why;
  if (CudaDeviceCount(&why) > 0) {
    GTEST_SKIP() << "a GPU is present: this is the refusal without one, which only a machine "
                    "without a usable GPU shows";
  }
  const std::string expected = "--device cuda:0: " + why;
#else
  const std::string expected = "--device cuda:0: this keel was built without the CUDA backend";
#endif
  Generate("linear", 500, 1);
  const auto exit = Train({"--job=linear_learner", "--epochs=1", "--device=cuda:0"}, 1, 60);
  ASSERT_TRUE(exit.finished) << exit.output;
  EXPECT_NE(exit.code, 0) << exit.output;
  // keel launch checks every role's flags, the device too, before it starts any.
  EXPECT_TRUE(Contains(exit.output, "keel launch: error: " + expected)) << exit.output;
  EXPECT_FALSE(Contains(exit.output, "examples across")) << exit.output;  // no epoch ran
}

// One-hot rows of three groups, interleaved: features 1, 2 and 3, positive in
// training at rates 0.9, 0.25 and 0.05, so a logistic model predicts about
// those; in the validation channel groups 1 and 2 are positive, group 3
// negative. At 0.5 the group-2 rows are called negative; only a threshold
// between the group-3 and group-2 predictions labels every validation row right.
void WriteShiftedRateChannels(const std::string& folder) {
  const int positives_in_20[] = {18, 5, 1};
  for (const std::string channel : {"train", "validation"}) {
    ASSERT_EQ(mkdir((folder + "/" + channel).c_str(), 0755), 0);
    std::ofstream out(folder + "/" + channel + "/part-0.libsvm");
    const int rows = channel == "train" ? 3000 : 300;
    for (int i = 0; i < rows; ++i) {
      const int group = i % 3;
      const bool positive = channel == "train" ? (i / 3) % 20 < positives_in_20[group] : group != 2;
      out << (positive ? 1 : 0) << " " << group + 1 << ":1\n";
    }
  }
}

TEST_F(TrainingJob, AccuracyTunesTheThresholdOnValidationAndPredictLabelsByIt) {
  WriteShiftedRateChannels(folder_);
  const auto exit = testing::Run(
      {KeelBinary(), "launch", "--servers=1", "--workers=1", "--train=" + folder_ + "/train",
       "--validation=" + folder_ + "/validation", "--test=" + folder_ + "/validation",
       "--model_dir=" + folder_ + "/model", "--minloglevel=1", "--job=linear_learner",
       "--epochs=10", "--mini_batch_size=50", "--learning_rate=0.05"},
      120);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  const auto metrics = ReadMetrics(folder_ + "/model/metrics.json");
  ASSERT_TRUE(metrics.count("validation:threshold")) << exit.output;
  EXPECT_EQ(metrics.at("validation:accuracy"), 1.0);
  const double threshold = metrics.at("validation:threshold");
  EXPECT_NE(threshold, 0.5);
  const auto model = testing::ParseJsonObject(ReadFileOrEmpty(folder_ + "/model/model.json"));
  EXPECT_NEAR(std::stod(model.at("threshold")), threshold, 1e-8);  // metrics.json: 9 digits
  // The test metrics (the validation rows again) use the tuned threshold.
  EXPECT_EQ(metrics.at("test:binary_classification_accuracy"), 1.0);

  const auto predict = Predict(folder_, "validation");
  ASSERT_TRUE(predict.finished && predict.code == 0) << predict.output;
  std::vector<Prediction> predictions;
  ASSERT_NO_FATAL_FAILURE(ReadPredictions(folder_ + "/predictions.csv", &predictions));
  size_t positive_below_one_half = 0;
  for (size_t row = 0; row < predictions.size(); ++row) {
    const auto& [line, label, probability] = predictions[row];
    EXPECT_EQ(label, row % 3 != 2 ? 1 : 0) << "row " << row << ": " << line;
    if (label == 1 && probability < 0.5) ++positive_below_one_half;
  }
  EXPECT_EQ(predictions.size(), 300u);
  EXPECT_EQ(positive_below_one_half, 100u) << "the group-2 rows, below 0.5 yet labelled 1";
}

}  // namespace
}  // namespace keel

namespace keel {
namespace {

// The model a run of one worker trained, as metrics.json gives it.
double ValidationLoss(const std::string& model_dir) {
  return ReadMetrics(model_dir + "/metrics.json").at("validation:objective_loss");
}

TEST_F(TrainingJob, ASecondJobOnTheSameDataReadsTheBatchCacheAndLearnsTheSame) {
  Generate("linear", 6000, 2);
  const std::string cache = folder_ + "/cache";
  const std::vector<std::string> flags = {"--job=linear_learner", "--epochs=3",
                                          "--cache_dir=" + cache, "--minloglevel=0"};
  const auto first = Train(flags, 1);
  ASSERT_TRUE(first.finished && first.code == 0) << first.output;
  EXPECT_TRUE(Contains(first.output, "training rows are good (checked in")) << first.output;
  const double written = ValidationLoss(folder_ + "/model");
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(cache)) {
    EXPECT_NE(entry.path().string().find("-worker-0.batches"), std::string::npos) << entry.path();
    ++files;
  }
  EXPECT_EQ(files, 1u);

  const auto second = Train(flags, 1);
  ASSERT_TRUE(second.finished && second.code == 0) << second.output;
  EXPECT_TRUE(Contains(second.output, "training rows are good (read from " + cache))
      << second.output;
  EXPECT_DOUBLE_EQ(ValidationLoss(folder_ + "/model"), written);

  const auto parsed = Train({"--job=linear_learner", "--epochs=3", "--cache_dir=none"}, 1);
  ASSERT_TRUE(parsed.finished && parsed.code == 0) << parsed.output;
  EXPECT_DOUBLE_EQ(ValidationLoss(folder_ + "/model"), written);
}

TEST_F(TrainingJob, TheDefaultCacheFolderIsGoneWhenTheJobEnds) {
  Generate("linear", 3000, 2);
  const std::string tmp = folder_ + "/tmp";
  const auto exit =
      TrainWithTemporaryFolder(tmp, {"--job=linear_learner", "--epochs=2", "--minloglevel=0"}, 2);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  for (const char* worker : {"worker 0", "worker 1"}) {
    EXPECT_TRUE(Contains(
        exit.output,
        std::string(worker) + ": its share's minibatches are cached in " + tmp + "/keel-cache-"))
        << worker << " in\n"
        << exit.output;
  }
  for (const auto& entry : std::filesystem::directory_iterator(tmp)) {
    EXPECT_EQ(entry.path().filename().string().rfind("keel-cache-", 0), std::string::npos)
        << entry.path() << " left behind";
  }
}

TEST_F(TrainingJob, AOneEpochJobWritesNoTemporaryCache) {
  Generate("linear", 3000, 2);
  const std::string tmp = folder_ + "/tmp";
  const auto exit =
      TrainWithTemporaryFolder(tmp, {"--job=linear_learner", "--epochs=1", "--minloglevel=0"}, 1);
  ASSERT_TRUE(exit.finished && exit.code == 0) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "worker 0: no batch cache: the job has one epoch"))
      << exit.output;
  EXPECT_FALSE(Contains(exit.output, "minibatches are cached in")) << exit.output;
  EXPECT_TRUE(Contains(exit.output, "training rows are good (checked in")) << exit.output;
  EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "something was left behind in " << tmp;
}

TEST_F(TrainingJob, BenchTrainSaysWhereEachEpochsTimeWent) {
  Generate("linear", 4000, 2);
  const auto bench =
      testing::Run({KeelBinary(), "bench", "train", "--data=" + folder_,
                    "--flagfile=" + testing::SourceDir() + "/configs/linear_learner.flags",
                    "--epochs=3", "--minloglevel=1"},
                   120);
  ASSERT_TRUE(bench.finished && bench.code == 0) << bench.output;
  std::smatch json;
  ASSERT_TRUE(std::regex_search(bench.output, json, std::regex("\\{\"bench\":\"train\".*\\}")))
      << bench.output;
  const JsonValue report = ParseJson(json.str(), "bench train");
  EXPECT_GT(report.Find("examples_per_s_after_first_epoch")->AsNumber(), 0);
  EXPECT_GT(report.Find("first_minibatch_seconds")->AsNumber(), 0);
  double shares = 0;
  for (const auto& [stage, share] : report.Find("shares")->AsObject()) {
    EXPECT_GE(share.AsNumber(), 0) << stage;
    shares += share.AsNumber();
  }
  EXPECT_NEAR(shares, 1.0, 0.01);
  for (const char* epoch : {"\n    1      0 ", "\n    2      0 ", "\n    3      0 "}) {
    EXPECT_TRUE(Contains(bench.output, epoch)) << epoch << " in\n" << bench.output;
  }
}

}  // namespace
}  // namespace keel
