#include "kv/initializer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/error.h"

namespace keel {
namespace {

constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;
// Keeps seed 0 and key 0 away from the finalizer's fixed point at 0.
constexpr uint64_t kSeedSalt = 0x6a09e667f3bcc909ULL;
constexpr double kTwoPi = 6.283185307179586476925;

// The splitmix64 output function: every input bit affects every output bit.
uint64_t Finalize(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [0, 1), from the top 53 bits.
double UnitInterval(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

enum class Method { kConstant, kUniform, kNormal };

struct ResolvedSpec {
  Method method;
  float value;
  float scale;
};

ResolvedSpec Resolve(const InitializerSpec& spec, const std::string& where) {
  Method method;
  if (spec.method == "constant") {
    method = Method::kConstant;
  } else if (spec.method == "uniform") {
    method = Method::kUniform;
  } else if (spec.method == "normal") {
    method = Method::kNormal;
  } else {
    throw MakeError(where, ": unknown initializer method '", spec.method,
                    "': expected constant, uniform or normal");
  }
  if (!std::isfinite(spec.scale) || spec.scale < 0) {
    throw MakeError(where, ": initializer scale ", spec.scale,
                    " must be a non-negative finite number");
  }
  if (!std::isfinite(spec.value)) {
    throw MakeError(where, ": initializer value ", spec.value, " is not a finite number");
  }
  return {method, spec.value, spec.scale};
}

struct ResolvedGroup {
  int begin;
  int end;
  ResolvedSpec spec;
};

// Fills columns by the stream of splitmix64 seeded from (seed, key): draw d
// of column c is the finalized state + (2c + d + 1) * gamma.
class DeterministicInitializer {
 public:
  DeterministicInitializer(ResolvedSpec default_spec, std::vector<ResolvedGroup> groups,
                           uint64_t seed)
      : default_spec_(default_spec),
        groups_(std::move(groups)),
        seed_state_(Finalize(seed + kSeedSalt)) {}

  void operator()(Key key, float* weights, int width) const {
    const uint64_t row_state = Finalize(seed_state_ ^ key) + kSeedSalt;
    int column = 0;
    for (const ResolvedGroup& group : groups_) {  // sorted by column
      if (group.begin >= width) break;
      Fill(row_state, default_spec_, column, group.begin, weights);
      column = std::min(group.end, width);
      Fill(row_state, group.spec, group.begin, column, weights);
    }
    Fill(row_state, default_spec_, column, width, weights);
  }

 private:
  static void Fill(uint64_t row_state, const ResolvedSpec& spec, int begin, int end,
                   float* weights) {
    switch (spec.method) {
      case Method::kConstant:
        for (int c = begin; c < end; ++c) weights[c] = spec.value;
        break;
      case Method::kUniform:
        for (int c = begin; c < end; ++c) {
          const double u = UnitInterval(Draw(row_state, c, 0));
          weights[c] = static_cast<float>(spec.scale * (2.0 * u - 1.0));
        }
        break;
      case Method::kNormal:
        for (int c = begin; c < end; ++c) {
          // Box-Muller; 1 - u keeps the logarithm's argument in (0, 1].
          const double radius =
              std::sqrt(-2.0 * std::log(1.0 - UnitInterval(Draw(row_state, c, 0))));
          const double angle = kTwoPi * UnitInterval(Draw(row_state, c, 1));
          weights[c] = static_cast<float>(spec.scale * radius * std::cos(angle));
        }
        break;
    }
  }

  static uint64_t Draw(uint64_t row_state, int column, int draw) {
    const uint64_t counter = 2 * static_cast<uint64_t>(column) + static_cast<uint64_t>(draw) + 1;
    return Finalize(row_state + counter * kGoldenGamma);
  }

  ResolvedSpec default_spec_;
  std::vector<ResolvedGroup> groups_;
  uint64_t seed_state_;
};

}  // namespace

ParameterTable::Initializer MakeInitializer(const InitializerSpec& default_spec,
                                            std::vector<InitializerGroup> groups, uint64_t seed) {
  const ResolvedSpec resolved_default = Resolve(default_spec, "default initializer");
  std::vector<ResolvedGroup> resolved;
  resolved.reserve(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const InitializerGroup& group = groups[g];
    const std::string where = "initializer group " + std::to_string(g) + " [" +
                              std::to_string(group.begin) + ", " + std::to_string(group.end) + ")";
    if (group.begin < 0 || group.end <= group.begin) {
      throw MakeError(where, ": columns must satisfy 0 <= begin < end");
    }
    resolved.push_back({group.begin, group.end, Resolve(group.spec, where)});
  }
  std::sort(resolved.begin(), resolved.end(),
            [](const ResolvedGroup& a, const ResolvedGroup& b) { return a.begin < b.begin; });
  for (size_t g = 1; g < resolved.size(); ++g) {
    if (resolved[g].begin < resolved[g - 1].end) {
      throw MakeError("initializer groups [", resolved[g - 1].begin, ", ", resolved[g - 1].end,
                      ") and [", resolved[g].begin, ", ", resolved[g].end, ") overlap");
    }
  }
  return DeterministicInitializer(resolved_default, std::move(resolved), seed);
}

}  // namespace keel
