#include "kv/initializer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "kv/keys.h"
#include "kv/parameter_table.h"

namespace keel {
namespace {

InitializerSpec Spec(const std::string& method, float scale, float value = 0) {
  InitializerSpec spec;
  spec.method = method;
  spec.scale = scale;
  spec.value = value;
  return spec;
}

std::vector<float> RowOf(const ParameterTable::Initializer& initializer, Key key, int width) {
  std::vector<float> row(width, -123.0f);
  initializer(key, row.data(), width);
  return row;
}

struct Moments {
  double mean;
  double deviation;
};

Moments MomentsOf(const std::vector<double>& values) {
  double sum = 0, squares = 0;
  for (double v : values) sum += v;
  const double mean = sum / values.size();
  for (double v : values) squares += (v - mean) * (v - mean);
  return {mean, std::sqrt(squares / values.size())};
}

TEST(Initializer, ConstantFillsTheExactValue) {
  auto initializer = MakeInitializer(Spec("constant", 0.01f, 0.25f), {}, 1);
  for (Key key : {Key{0}, Key{17}, ~Key{0}}) {
    for (float w : RowOf(initializer, key, 5)) EXPECT_EQ(w, 0.25f);
  }
  auto zeros = MakeInitializer(InitializerSpec(), {}, 1);
  for (float w : RowOf(zeros, 8, 3)) EXPECT_EQ(w, 0.0f);
}

TEST(Initializer, SameKeyColumnAndSeedGiveTheSameValue) {
  const InitializerSpec normal = Spec("normal", 0.1f);
  auto first = MakeInitializer(normal, {}, 42);
  auto second = MakeInitializer(normal, {}, 42);
  const std::vector<Key> keys = {MixKey(1), MixKey(2), 0, ~Key{0}, 12345};
  std::vector<std::vector<float>> rows;
  for (Key key : keys) rows.push_back(RowOf(first, key, 6));
  // Another initializer, keys in the opposite order, rows of another width.
  for (size_t i = keys.size(); i-- > 0;) {
    EXPECT_EQ(RowOf(second, keys[i], 6), rows[i]) << "key " << keys[i];
    const std::vector<float> narrow = RowOf(second, keys[i], 3);
    EXPECT_TRUE(std::equal(narrow.begin(), narrow.end(), rows[i].begin())) << "key " << keys[i];
  }
}

TEST(Initializer, DifferentSeedsGiveDifferentRows) {
  for (const char* method : {"uniform", "normal"}) {
    auto one = MakeInitializer(Spec(method, 0.1f), {}, 1);
    auto two = MakeInitializer(Spec(method, 0.1f), {}, 2);
    for (Key key = 0; key < 20; ++key) {
      const std::vector<float> a = RowOf(one, key, 4), b = RowOf(two, key, 4);
      for (int c = 0; c < 4; ++c) EXPECT_NE(a[c], b[c]) << method << ", key " << key;
    }
  }
}

TEST(Initializer, DifferentKeysAndColumnsGiveDifferentValues) {
  auto initializer = MakeInitializer(Spec("uniform", 1.0f), {}, 0);
  std::set<float> seen;
  for (Key key = 0; key < 1000; ++key) {
    for (float w : RowOf(initializer, key, 4)) seen.insert(w);
  }
  EXPECT_GE(seen.size(), 3990u);  // a float collision or two is fine, a pattern is not
}

TEST(Initializer, NormalHasMeanZeroAndStandardDeviationScale) {
  const float scale = 0.5f;
  auto initializer = MakeInitializer(Spec("normal", scale), {}, 9);
  const int width = 4;
  std::vector<double> values, column0, column1;
  // Consecutive keys: the hash, not the keys, must make them independent.
  for (Key key = 0; key < 20000; ++key) {
    const std::vector<float> row = RowOf(initializer, key, width);
    values.insert(values.end(), row.begin(), row.end());
    column0.push_back(row[0]);
    column1.push_back(row[1]);
  }
  const Moments moments = MomentsOf(values);  // 80000 samples: standard error 0.0035 scale
  EXPECT_NEAR(moments.mean, 0.0, 0.02 * scale);
  EXPECT_NEAR(moments.deviation, scale, 0.02 * scale);
  size_t beyond_three = 0;
  for (double v : values) beyond_three += std::fabs(v) > 3 * scale;
  EXPECT_NEAR(static_cast<double>(beyond_three) / values.size(), 0.0027, 0.001);
  double covariance = 0;
  for (size_t i = 0; i < column0.size(); ++i) covariance += column0[i] * column1[i];
  EXPECT_NEAR(covariance / column0.size() / (scale * scale), 0.0, 0.03);  // correlation
}

TEST(Initializer, UniformStaysWithinScaleAndFillsIt) {
  const float scale = 0.2f;
  auto initializer = MakeInitializer(Spec("uniform", scale), {}, 3);
  std::vector<double> values;
  for (Key key = 0; key < 10000; ++key) {
    for (float w : RowOf(initializer, MixKey(key), 3)) values.push_back(w);
  }
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  EXPECT_GE(*low, -scale);
  EXPECT_LE(*high, scale);
  EXPECT_LT(*low, -0.99 * scale);
  EXPECT_GT(*high, 0.99 * scale);
  const Moments moments = MomentsOf(values);
  EXPECT_NEAR(moments.mean, 0.0, 0.02 * scale);
  EXPECT_NEAR(moments.deviation, scale / std::sqrt(3.0), 0.02 * scale);
}

TEST(Initializer, GroupsUseTheirOwnSpec) {
  // A factorization machine's row: a zero linear weight, then random factors.
  auto initializer =
      MakeInitializer(Spec("normal", 0.1f),
                      {{4, 5, Spec("constant", 0, 1.0f)}, {0, 1, Spec("constant", 0, 0.0f)}}, 5);
  auto all_normal = MakeInitializer(Spec("normal", 0.1f), {}, 5);
  const std::vector<float> row = RowOf(initializer, 77, 6);
  const std::vector<float> reference = RowOf(all_normal, 77, 6);
  EXPECT_EQ(row[0], 0.0f);
  for (int c = 1; c < 4; ++c) EXPECT_EQ(row[c], reference[c]) << c;
  EXPECT_EQ(row[4], 1.0f);
  EXPECT_EQ(row[5], reference[5]);
  // A group reaching past the row covers what fits.
  const std::vector<float> narrow = RowOf(initializer, 77, 1);
  EXPECT_EQ(narrow[0], 0.0f);
}

TEST(Initializer, FillsTheWeightsOfNewTableRows) {
  auto initializer = MakeInitializer(Spec("uniform", 0.1f), {}, 11);
  ParameterTable table(3, 2, initializer);
  const float* row = table.FindOrInsert(MixKey(5));
  const std::vector<float> expected = RowOf(initializer, MixKey(5), 3);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(row[c], expected[c]) << c;
  EXPECT_EQ(row[3], 0.0f);  // the optimizer's state stays zero
  EXPECT_EQ(row[4], 0.0f);
}

TEST(Initializer, RejectsUnknownMethodsAndBadScales) {
  try {
    MakeInitializer(Spec("xavier", 0.1f), {}, 0);
    FAIL() << "an unknown method was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'xavier'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MakeInitializer(Spec("normal", -0.1f), {}, 0), Error);
  EXPECT_THROW(MakeInitializer(Spec("uniform", NAN), {}, 0), Error);
  EXPECT_THROW(MakeInitializer(Spec("constant", 0.1f), {{0, 2, Spec("normal", -1.0f)}}, 0), Error);
  EXPECT_THROW(MakeInitializer(Spec("constant", 0.1f), {{0, 2, Spec("gaussian", 1.0f)}}, 0), Error);
}

TEST(Initializer, RejectsEmptyOrOverlappingGroups) {
  const InitializerSpec zero = Spec("constant", 0);
  EXPECT_THROW(MakeInitializer(zero, {{3, 3, zero}}, 0), Error);
  EXPECT_THROW(MakeInitializer(zero, {{-1, 3, zero}}, 0), Error);
  EXPECT_THROW(MakeInitializer(zero, {{2, 5, zero}, {0, 3, zero}}, 0), Error);
  EXPECT_NO_THROW(MakeInitializer(zero, {{2, 5, zero}, {0, 2, zero}}, 0));
}

}  // namespace
}  // namespace keel
