// Early stopping: which epoch's model is kept, and when a job of several
// models stops (worker/early_stopping.h).
#include "worker/early_stopping.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace keel {
namespace {

class EarlyStopping : public ::testing::Test {
 protected:
  void SetUp() override {
    hyperparameters_.early_stopping_patience = 2;
    hyperparameters_.early_stopping_tolerance = 0.01;
    state_.set_best_loss(std::numeric_limits<double>::infinity());
  }

  // Judges an epoch whose selected model is model `selected` of `losses`.
  EpochVerdict Judge(const std::vector<double>& losses, int selected = 0) {
    return JudgeEpoch({{"objective_loss", losses[selected]}}, losses, hyperparameters_, &state_);
  }

  Hyperparameters hyperparameters_;
  proto::TrainerState state_;
};

TEST_F(EarlyStopping, TheFirstEpochIsTheBestSoFar) {
  const EpochVerdict verdict = Judge({10.0});
  EXPECT_TRUE(verdict.improved);
  EXPECT_FALSE(verdict.stop);
  EXPECT_EQ(state_.best_loss(), 10.0);
}

TEST_F(EarlyStopping, AnyLowerLossIsKeptEvenWithinTheTolerance) {
  Judge({10.0});
  // 0.1% lower: not a gain for stopping (tolerance 1%), but the better model.
  const EpochVerdict verdict = Judge({9.99});
  EXPECT_TRUE(verdict.improved);
  EXPECT_EQ(state_.best_loss(), 9.99);
  EXPECT_EQ(state_.epochs_without_gain(), 1);
}

TEST_F(EarlyStopping, StopsAfterPatienceEpochsWithoutAGainBeyondTheTolerance) {
  Judge({10.0});
  EXPECT_FALSE(Judge({9.95}).stop);  // 0.5%: within the tolerance
  const EpochVerdict verdict = Judge({9.92});  // 0.8% below the reference 10
  EXPECT_TRUE(verdict.stop);
  EXPECT_TRUE(verdict.improved);
}

TEST_F(EarlyStopping, SmallGainsThatAddUpBeyondTheToleranceCount) {
  hyperparameters_.early_stopping_patience = 3;
  Judge({10.0});
  Judge({9.95});  // 0.5% below the reference 10
  const EpochVerdict verdict = Judge({9.89});  // 1.1% below it: a gain
  EXPECT_FALSE(verdict.stop);
  EXPECT_EQ(state_.epochs_without_gain(), 0);
  EXPECT_EQ(state_.model_reference_losses(0), 9.89);
}

TEST_F(EarlyStopping, AModelStillGainingKeepsTheJobGoing) {
  // Model 0 is selected and flat; model 1 starts worse and keeps gaining.
  Judge({10.0, 20.0});
  EXPECT_FALSE(Judge({10.0, 15.0}).stop);
  EXPECT_FALSE(Judge({10.0, 12.0}).stop);
  EXPECT_EQ(state_.epochs_without_gain(), 0);
  // Model 1 overtakes: selected now, and a new best.
  EXPECT_TRUE(Judge({10.0, 9.0}, 1).improved);
  // Then nobody gains for two epochs: stop.
  EXPECT_FALSE(Judge({10.0, 9.0}, 1).stop);
  EXPECT_TRUE(Judge({10.0, 9.0}, 1).stop);
}

TEST_F(EarlyStopping, AWorseSelectedModelIsNotKept) {
  Judge({10.0, 11.0});
  const EpochVerdict verdict = Judge({10.5, 10.2}, 1);
  EXPECT_FALSE(verdict.improved);
  EXPECT_EQ(state_.best_loss(), 10.0);
  EXPECT_EQ(state_.epochs_without_gain(), 0);  // model 1 gained 7%
}

TEST_F(EarlyStopping, ANonFiniteLossIsNeverAGain) {
  Judge({10.0});
  const EpochVerdict verdict = Judge({std::numeric_limits<double>::quiet_NaN()});
  EXPECT_FALSE(verdict.improved);
  EXPECT_EQ(state_.epochs_without_gain(), 1);
  EXPECT_EQ(state_.model_reference_losses(0), 10.0);
}

TEST_F(EarlyStopping, AStateFromBeforePerModelReferencesStartsThemAfresh) {
  // A checkpoint of an older version: a best loss, no references.
  state_.set_best_loss(5.0);
  const EpochVerdict verdict = Judge({6.0, 7.0});
  EXPECT_FALSE(verdict.improved);
  EXPECT_EQ(state_.epochs_without_gain(), 0);
  ASSERT_EQ(state_.model_reference_losses_size(), 2);
}

}  // namespace
}  // namespace keel
