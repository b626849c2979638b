// A server's push apply path (ParameterTable::Push and PushSlots, the
// optimizers' batched UpdateRows, apply threads) against the scalar path:
// each row stepped alone, one after another, by Optimizer::UpdateRows of one
// row. Every optimizer, on random rows of widths 1, 2, 5, 9 and 33, must end
// with the same bits in every weight and every float of state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kv/keys.h"
#include "kv/optimizer.h"
#include "kv/parameter_table.h"

namespace keel {
namespace {

struct Case {
  std::string name;
  OptimizerOptions options;
};

// `name` ("adagrad", or "sgd+momentum": the optimizer, then what the case
// adds) with a rate and penalties.
Case Make(const std::string& name, float l1, float l2) {
  OptimizerOptions options;
  options.name = name.substr(0, name.find('+'));
  options.learning_rate = 0.05f;
  options.l1 = l1;
  options.l2 = l2;
  return {name, options};
}

std::vector<Case> Cases() {
  std::vector<Case> cases = {Make("sgd", 0, 0),
                             Make("sgd+penalties", 0.01f, 0.1f),
                             Make("sgd+momentum", 0.001f, 0),
                             Make("adagrad", 0.01f, 0.1f),
                             Make("rmsprop", 0, 0.01f),
                             Make("adam", 0, 0.1f),
                             Make("adam+schedule", 0, 0),
                             Make("ftrl", 0.5f, 0.3f),
                             Make("adagrad+shaping", 0, 0)};
  for (Case& test : cases) {
    OptimizerOptions& o = test.options;
    if (test.name == "sgd+penalties") o.groups.push_back({1, 3, 0.2f, 0.0f, 0.05f});
    if (test.name == "sgd+momentum") o.momentum = 0.9f;
    if (test.name == "adagrad") o.groups.push_back({0, 1, 0.3f, 0.02f, 0.0f});
    if (test.name == "adam+schedule") o.schedule = {true, 2, 0.5f, 0.001f};
    if (test.name == "adagrad+shaping") {
      o.rescale_grad = 0.5f;
      o.clip_gradient = 0.4f;
    }
  }
  return cases;
}

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// Random initial weights (some zero: FTRL's fresh-weight branch both ways).
void Initialize(Key key, float* weights, int width) {
  std::mt19937 random(static_cast<uint32_t>(key));
  std::normal_distribution<float> normal(0.0f, 0.5f);
  for (int i = 0; i < width; ++i) weights[i] = key % 3 == 0 ? 0.0f : normal(random);
}

// One push: distinct sorted keys, some seen before and some new, and their
// gradients (some zero).
struct Push {
  std::vector<Key> keys;
  std::vector<float> gradients;
  float step_scale = 1.0f;
};

std::vector<Push> Pushes(int width, size_t rows, std::mt19937& random) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<Push> pushes;
  for (int p = 0; p < 4; ++p) {
    Push push;
    // Pushes 0 and 1 hold the same keys (the second takes PushSlots); 2 and
    // 3 half of them and as many new ones.
    for (size_t i = 0; i < rows; ++i) {
      const uint64_t feature = p < 2 ? i : (i % 2 == 0 ? i : rows * p + i);
      push.keys.push_back(MixKey(feature));
    }
    std::sort(push.keys.begin(), push.keys.end());
    push.gradients.resize(push.keys.size() * static_cast<size_t>(width));
    for (size_t i = 0; i < push.gradients.size(); ++i) {
      push.gradients[i] = i % 11 == 0 ? 0.0f : normal(random);
    }
    push.step_scale = p == 2 ? 0.5f : 1.0f;  // a stale push's smaller step
    pushes.push_back(std::move(push));
  }
  return pushes;
}

// The rows the scalar path leaves: each row stepped alone, in push order.
std::map<Key, std::vector<float>> ScalarPath(const OptimizerOptions& options, int width,
                                             const std::vector<Push>& pushes) {
  std::unique_ptr<Optimizer> optimizer = MakeOptimizer(options);
  const size_t row_width = static_cast<size_t>(width + optimizer->StateWidth(width));
  std::map<Key, std::vector<float>> rows;
  for (const Push& push : pushes) {
    for (size_t i = 0; i < push.keys.size(); ++i) {
      auto [row, made] = rows.try_emplace(push.keys[i], row_width, 0.0f);
      if (made) Initialize(push.keys[i], row->second.data(), width);
      float* pointer = row->second.data();
      optimizer->UpdateRows(&pointer, push.gradients.data() + i * width, 1, width, push.step_scale);
    }
  }
  return rows;
}

// The same pushes through a table, applied with `threads` threads.
void ExpectSameBits(const Case& test, int width, int threads) {
  SCOPED_TRACE(test.name + ", width " + std::to_string(width) + ", " + std::to_string(threads) +
               " thread(s)");
  // With threads, enough rows for every thread to take a part
  // (ApplyThreads::kMinRowsPerPart); never a multiple of a block of rows.
  const size_t rows =
      threads == 1 ? 1037 : ApplyThreads::kMinRowsPerPart * static_cast<size_t>(threads) + 37;
  std::mt19937 random(static_cast<uint32_t>(width * 100 + threads));
  const std::vector<Push> pushes = Pushes(width, rows, random);

  std::unique_ptr<Optimizer> optimizer = MakeOptimizer(test.options);
  std::vector<std::unique_ptr<Optimizer>> more;
  for (int t = 1; t < threads; ++t) more.push_back(MakeOptimizer(test.options));
  ThreadPool pool(threads);
  const ApplyThreads apply{&pool, &more};
  ASSERT_EQ(apply.PartsFor(rows), threads);
  ParameterTable table(width, optimizer->StateWidth(width), Initialize);
  for (size_t p = 0; p < pushes.size(); ++p) {
    const Push& push = pushes[p];
    std::vector<uint32_t> slots;
    if (p == 1) {
      ASSERT_TRUE(table.FindSlots(push.keys.data(), push.keys.size(), &slots));
    }
    if (!slots.empty()) {
      table.PushSlots(slots.data(), slots.size(), push.gradients.data(), optimizer.get(),
                      push.step_scale, &apply);
    } else {
      table.Push(push.keys.data(), push.keys.size(), push.gradients.data(), optimizer.get(),
                 push.step_scale, &apply);
    }
  }

  const std::map<Key, std::vector<float>> expected = ScalarPath(test.options, width, pushes);
  ASSERT_EQ(table.size(), expected.size());
  size_t differing = 0;
  for (const auto& [key, want] : expected) {
    const float* got = table.Find(key);
    ASSERT_NE(got, nullptr);
    for (size_t c = 0; c < want.size(); ++c) {
      if (Bits(got[c]) != Bits(want[c]) && differing++ < 5) {
        ADD_FAILURE() << "key " << key << " float " << c << ": " << got[c] << " (scalar path "
                      << want[c] << ")";
      }
    }
  }
  EXPECT_EQ(differing, 0u);
}

// One test per optimizer case, so that each has its own timeout (the
// sanitizer tree takes tens of seconds for all of them at once).
class EveryOptimizer : public testing::TestWithParam<size_t> {};

TEST_P(EveryOptimizer, GivesTheScalarPathsBitsOnOneThread) {
  const Case test = Cases()[GetParam()];
  for (int width : {1, 2, 5, 9, 33}) ExpectSameBits(test, width, 1);
}

TEST_P(EveryOptimizer, GivesTheScalarPathsBitsOnTwoThreads) {
  const Case test = Cases()[GetParam()];
  for (int width : {1, 2, 5, 9, 33}) ExpectSameBits(test, width, 2);
}

INSTANTIATE_TEST_SUITE_P(ApplyPath, EveryOptimizer, testing::Range<size_t>(0, Cases().size()),
                         [](const testing::TestParamInfo<size_t>& info) {
                           std::string name = Cases()[info.param].name;
                           std::replace(name.begin(), name.end(), '+', '_');
                           return name;
                         });

TEST(ApplyPath, SmallPushesStayOnTheCallersThread) {
  std::vector<std::unique_ptr<Optimizer>> more;
  more.push_back(MakeOptimizer(OptimizerOptions()));
  ThreadPool pool(2);
  const ApplyThreads apply{&pool, &more};
  EXPECT_EQ(apply.PartsFor(2 * ApplyThreads::kMinRowsPerPart - 1), 1);
  EXPECT_EQ(apply.PartsFor(2 * ApplyThreads::kMinRowsPerPart), 2);
  EXPECT_EQ(apply.PartsFor(100 * ApplyThreads::kMinRowsPerPart), 2);
  // A table made before the pool had fewer optimizers: no more parts than it has.
  std::vector<std::unique_ptr<Optimizer>> none;
  EXPECT_EQ((ApplyThreads{&pool, &none}).PartsFor(100 * ApplyThreads::kMinRowsPerPart), 1);
  EXPECT_EQ((ApplyThreads{}).PartsFor(100 * ApplyThreads::kMinRowsPerPart), 1);
}

}  // namespace
}  // namespace keel
