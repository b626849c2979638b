#include "worker/exact_sum_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/error.h"
#include "base/json.h"

namespace keel {
namespace {

// Sums stay exact in float below this.
constexpr uint64_t kExactFloatLimit = uint64_t{1} << 24;
// Times one push may be made (a rank's worker replaced, more than once).
constexpr uint64_t kMaxRepeats = 4;
// Features and minibatches a workload may have (a dump and a check in memory).
constexpr uint64_t kMaxFeatures = uint64_t{1} << 24;
constexpr int kMaxCount = 1 << 20;

std::string Hex(Key key) {
  char text[24];
  snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(key));
  return text;
}

// The feature a dumped key stands for, and the sums it must hold.
struct Expectation {
  uint64_t feature;
  uint64_t least;
  uint64_t most;
};

Expectation ExpectationOf(const ExpectedSums& expected, Key key) {
  const uint64_t feature = UnmixKey(key);
  if (feature >= expected.features()) return {feature, 0, 0};  // no push touched it
  return {feature, expected.least(feature), expected.most(feature)};
}

// Adds `key`'s check to `report`.
void CheckKey(Key key, double sum, const Expectation& want, const RangeMap& ranges,
              ExactSumReport* report) {
  const size_t range = ranges.RangeOf(key);
  RangeCheck& tally = report->ranges[range];
  ++tally.keys_checked;
  ++report->keys_checked;
  tally.expected += static_cast<double>(want.least);
  const bool integer = sum == std::floor(sum);
  SumViolation violation{SumViolation::kLost, key, want.feature, range, sum, want.least, want.most};
  if (sum < static_cast<double>(want.least) || (!integer && sum < static_cast<double>(want.most))) {
    ++tally.lost;
    tally.missing += std::max(0.0, static_cast<double>(want.least) - sum);
    if (tally.announced_lost) {
      ++report->announced_lost;
      return;
    }
    ++report->lost;
  } else if (sum > static_cast<double>(want.most) || !integer) {
    violation.kind = SumViolation::kDoubled;
    ++tally.doubled;
    ++report->doubled;
  } else {
    return;
  }
  report->violations.push_back(violation);
}

const char* KindName(SumViolation::Kind kind) {
  return kind == SumViolation::kLost ? "lost" : "doubled";
}

}  // namespace

void CheckExactSumWorkload(const ExactSumWorkload& workload, int workers) {
  if (workload.features < 1 || workload.features > kMaxFeatures) {
    throw MakeError("--exact_sum_keys=", workload.features, ": must be in 1..", kMaxFeatures);
  }
  if (workload.shared_features > workload.features) {
    throw MakeError("exact_sum: ", workload.shared_features, " shared keys but only ",
                    workload.features, " keys (--exact_sum_keys)");
  }
  if (workload.epochs < 1 || workload.epochs > kMaxCount) {
    throw MakeError("--epochs=", workload.epochs, ": must be in 1..", kMaxCount);
  }
  if (workload.minibatches < 1 || workload.minibatches > kMaxCount) {
    throw MakeError("--exact_sum_minibatches=", workload.minibatches, ": must be in 1..",
                    kMaxCount);
  }
  const uint64_t pushes = static_cast<uint64_t>(workers) * static_cast<uint64_t>(workload.epochs) *
                          static_cast<uint64_t>(workload.minibatches);
  if (pushes * kMaxRepeats * kMaxExactSumGradient >= kExactFloatLimit) {
    throw MakeError("exact_sum: ", workers, " workers x --epochs=", workload.epochs,
                    " x --exact_sum_minibatches=", workload.minibatches, " = ", pushes,
                    " pushes per key: too many for sums exact in float (at most ",
                    (kExactFloatLimit - 1) / kMaxRepeats / kMaxExactSumGradient, ")");
  }
}

std::vector<uint64_t> ExactSumFeatures(const ExactSumWorkload& workload, const PushId& push) {
  std::vector<uint64_t> features;
  for (uint64_t f = 0; f < workload.features; ++f) {
    const uint64_t turn = f + static_cast<uint64_t>(push.rank + push.epoch + push.minibatch);
    if (f < workload.shared_features || turn % 3 == 0) features.push_back(f);
  }
  return features;
}

float ExactSumGradient(const PushId& push, uint64_t feature) {
  const uint64_t mixed = static_cast<uint64_t>(push.rank) * 3 +
                         static_cast<uint64_t>(push.epoch) * 5 +
                         static_cast<uint64_t>(push.minibatch) * 7 + feature;
  return static_cast<float>(1 + mixed % kMaxExactSumGradient);
}

ExpectedSums::ExpectedSums(const ExactSumWorkload& workload)
    : workload_(workload), least_(workload.features, 0), most_(workload.features, 0) {}

void ExpectedSums::AddAcknowledged(const PushId& push) {
  ++acknowledged_;
  if (!seen_.insert(push).second) ++repeated_;
  Add(push, true);
}

void ExpectedSums::AddUnacknowledged(const PushId& push) {
  ++unacknowledged_;
  Add(push, false);
}

void ExpectedSums::AddLedgers(const std::vector<ProcessLedger>& ledgers) {
  for (const ProcessLedger& ledger : ledgers) {
    std::multiset<PushId> unanswered(ledger.sent.begin(), ledger.sent.end());
    for (const PushId& push : ledger.acknowledged) {
      AddAcknowledged(push);
      unanswered.erase(unanswered.find(push));  // ParseLedger: each was sent
    }
    for (const PushId& push : unanswered) AddUnacknowledged(push);
  }
}

void ExpectedSums::Add(const PushId& push, bool certain) {
  for (uint64_t feature : ExactSumFeatures(workload_, push)) {
    const auto gradient = static_cast<uint64_t>(ExactSumGradient(push, feature));
    if (certain) least_[feature] += gradient;
    most_[feature] += gradient;
  }
}

ExactSumReport CompareSums(const ExpectedSums& expected, const std::vector<Key>& keys,
                           const std::vector<float>& weights, const RangeMap& ranges,
                           const std::set<size_t>& announced) {
  if (weights.size() != keys.size()) {
    throw MakeError("exact_sum: the dump has ", keys.size(), " keys but ", weights.size(),
                    " weights");
  }
  ExactSumReport report;
  report.pushes_acknowledged = expected.acknowledged();
  report.pushes_unacknowledged = expected.unacknowledged();
  report.pushes_repeated = expected.repeated();
  for (size_t r = 0; r < ranges.num_ranges(); ++r) {
    report.ranges.push_back(
        {ranges.begin(r), ranges.last(r), ranges.server(r), 0, 0, 0, announced.count(r) > 0});
  }
  // Every feature of the workload, in key order, merged with the dump.
  std::vector<uint64_t> features(expected.features());
  for (uint64_t f = 0; f < features.size(); ++f) features[f] = f;
  const std::vector<Key> wanted = MixedKeySet(features);
  size_t d = 0;
  for (size_t w = 0; w < wanted.size() || d < keys.size();) {
    const bool from_dump = d < keys.size() && (w == wanted.size() || keys[d] <= wanted[w]);
    const Key key = from_dump ? keys[d] : wanted[w];
    const double sum = from_dump ? -static_cast<double>(weights[d]) : 0.0;
    CheckKey(key, sum, ExpectationOf(expected, key), ranges, &report);
    if (w < wanted.size() && wanted[w] == key) ++w;
    if (from_dump) ++d;
  }
  return report;
}

std::string DescribeViolation(const SumViolation& violation, const ExactSumReport& report) {
  const RangeCheck& range = report.ranges[violation.range];
  std::ostringstream text;
  text << "key " << Hex(violation.key) << " (feature " << violation.feature << ") in range "
       << violation.range << " [" << Hex(range.begin) << ", " << Hex(range.last) << "] on server "
       << range.primary << ": sum " << violation.sum << ", expected ";
  if (violation.least == violation.most) {
    text << violation.least;
  } else {
    text << violation.least << " to " << violation.most;
  }
  text << ": " << KindName(violation.kind) << " updates";
  return text.str();
}

std::string ExactSumJson(const ExactSumReport& report, size_t max_listed) {
  constexpr auto kCompact = JsonObject::Style::kCompact;
  std::vector<std::string> ranges, violating_keys;
  for (size_t r = 0; r < report.ranges.size(); ++r) {
    const RangeCheck& range = report.ranges[r];
    ranges.push_back(JsonObject(kCompact)
                         .Count("range", r)
                         .String("begin", Hex(range.begin))
                         .String("last", Hex(range.last))
                         .Integer("primary", range.primary)
                         .Count("keys_checked", range.keys_checked)
                         .Count("lost", range.lost)
                         .Count("doubled", range.doubled)
                         .Bool("announced_lost", range.announced_lost)
                         .Number("expected", range.expected, 17)
                         .Number("missing", range.missing, 17)
                         .Close());
  }
  for (size_t i = 0; i < report.violations.size() && i < max_listed; ++i) {
    const SumViolation& v = report.violations[i];
    violating_keys.push_back(JsonObject(kCompact)
                                 .String("key", Hex(v.key))
                                 .Count("feature", v.feature)
                                 .Count("range", v.range)
                                 .String("kind", KindName(v.kind))
                                 .Number("sum", v.sum, 17)
                                 .Count("expected_least", v.least)
                                 .Count("expected_most", v.most)
                                 .String("text", DescribeViolation(v, report))
                                 .Close());
  }
  return JsonObject(kCompact)
      .String("job", "exact_sum")
      .Bool("ok", report.ok())
      .Count("keys_checked", report.keys_checked)
      .Count("violations", report.violations.size())
      .Count("lost", report.lost)
      .Count("announced_lost", report.announced_lost)
      .Count("doubled", report.doubled)
      .Add("pushes", JsonObject(kCompact)
                         .Count("acknowledged", report.pushes_acknowledged)
                         .Count("unacknowledged", report.pushes_unacknowledged)
                         .Count("repeated", report.pushes_repeated)
                         .Close())
      .Add("ranges", JsonArray(ranges, kCompact))
      .Add("violating_keys", JsonArray(violating_keys, kCompact))
      .Close();
}

}  // namespace keel
