// The time a server's table takes to apply pushes, alone (no network, no
// request handling): ParameterTable::Push of rows that exist, through each
// optimizer at each row width, in pushes of 10^5 sorted mixed keys as a
// worker sends them; and the same pushes through PushSlots, as a push that
// names a kept key list is applied (the slots found once, beforehand). Built
// against a build tree's libraries by scripts/bench/apply_time.sh, so that
// two builds run the same harness.
//
//   apply_time KEYS PASSES WIDTH...
//
// Prints two lines per optimizer and width: its name (then its name and
// "/slots"), the width and the median over PASSES passes of nanoseconds per
// key pushed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kv/keys.h"
#include "kv/optimizer.h"
#include "kv/parameter_table.h"

namespace {

struct PerKey {
  double keys = 0;   // ParameterTable::Push
  double slots = 0;  // ParameterTable::PushSlots
};

// The median over `passes` passes of `pass()` (after one more untimed pass
// first), in nanoseconds per key of `keys`.
template <typename Pass>
double MedianNanosecondsPerKey(int passes, uint64_t keys, Pass pass) {
  std::vector<double> seconds;
  for (int round = -1; round < passes; ++round) {
    const auto start = std::chrono::steady_clock::now();
    pass();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (round >= 0) seconds.push_back(took.count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2] * 1e9 / static_cast<double>(keys);
}

PerKey NanosecondsPerKey(const std::string& name, int width, uint64_t keys, int passes) {
  keel::OptimizerOptions options;
  options.name = name;
  options.learning_rate = 1e-6f;  // the values stay small however long it runs
  std::unique_ptr<keel::Optimizer> optimizer = keel::MakeOptimizer(options);
  keel::ParameterTable table(width, optimizer->StateWidth(width));
  constexpr uint64_t kPerPush = 100000;
  std::vector<std::vector<keel::Key>> pushes;
  for (uint64_t begin = 0; begin < keys; begin += kPerPush) {
    std::vector<keel::Key> batch;
    for (uint64_t i = begin; i < std::min(keys, begin + kPerPush); ++i) {
      batch.push_back(keel::MixKey(i));
    }
    std::sort(batch.begin(), batch.end());
    pushes.push_back(std::move(batch));
  }
  std::mt19937 random(5);
  std::uniform_real_distribution<float> gradient(-1.0f, 1.0f);
  std::vector<float> gradients(kPerPush * static_cast<size_t>(width));
  for (float& g : gradients) g = gradient(random);
  PerKey per_key;
  // The untimed first pass makes the rows.
  per_key.keys = MedianNanosecondsPerKey(passes, keys, [&] {
    for (const auto& batch : pushes) {
      table.Push(batch.data(), batch.size(), gradients.data(), optimizer.get(), 1.0f);
    }
  });
  std::vector<std::vector<uint32_t>> slots(pushes.size());
  for (size_t i = 0; i < pushes.size(); ++i) {
    if (!table.FindSlots(pushes[i].data(), pushes[i].size(), &slots[i])) {
      std::fprintf(stderr,
                   "apply_time: FindSlots refused a push (a key without a row, or slots "
                   "past 32 bits)\n");
      std::exit(1);
    }
  }
  per_key.slots = MedianNanosecondsPerKey(passes, keys, [&] {
    for (const auto& batch : slots) {
      table.PushSlots(batch.data(), batch.size(), gradients.data(), optimizer.get(), 1.0f);
    }
  });
  return per_key;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: apply_time KEYS PASSES WIDTH...\n");
    return 2;
  }
  const uint64_t keys = std::strtoull(argv[1], nullptr, 10);
  const int passes = std::atoi(argv[2]);
  if (keys == 0 || passes < 1) {
    std::fprintf(stderr, "apply_time: KEYS and PASSES must be positive\n");
    return 2;
  }
  for (const char* name : {"sgd", "adagrad", "adam", "ftrl"}) {
    for (int arg = 3; arg < argc; ++arg) {
      const int width = std::atoi(argv[arg]);
      if (width < 1) {
        std::fprintf(stderr, "apply_time: width '%s' is not positive\n", argv[arg]);
        return 2;
      }
      const PerKey per_key = NanosecondsPerKey(name, width, keys, passes);
      std::printf("%s %d %.2f\n%s/slots %d %.2f\n", name, width, per_key.keys, name, width,
                  per_key.slots);
      std::fflush(stdout);
    }
  }
  return 0;
}
