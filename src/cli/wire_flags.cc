#include "cli/wire_flags.h"

#include <cmath>

#include "base/error.h"
#include "kv/wire_precision.h"

DEFINE_string(
    wire_precision, "auto",
    "worker: how training pushes (gradients) and pulls (weights) travel: fp32, bf16 "
    "or fp16 (16-bit values, half the bytes; the servers widen them and keep float32 "
    "state; a message holding a value that rounds past fp16's +-65504 goes as fp32), or auto: "
    "fp16 for the linear learner's classifiers (test AUC within 0.0008 of fp32's on "
    "the sets measured, docs/BENCHMARKS.md), fp32 for its regressor and the other "
    "jobs. exact_sum and kv_bench refuse a 16-bit precision");
DEFINE_double(push_filter_threshold, 0,
              "worker: the Parameter Server paper's filter of training pushes: a weight row "
              "goes only once one of its gradient values, summed since it last went, is at "
              "least this in magnitude; the rest is kept on the worker and added to the "
              "key's next gradient, and every remainder is pushed before a checkpoint and at "
              "the end of each epoch. 0: off (every row goes). Refused by --job=exact_sum "
              "and kv_bench");

namespace keel {

std::vector<FlagGroup> WireFlagGroups() {
  return {{"wire precision", {"wire_precision"}}, {"push filter", {"push_filter_threshold"}}};
}

proto::WirePrecision WirePrecisionFromFlags(const std::string& job,
                                            const std::string& predictor_type) {
  if (FLAGS_wire_precision == "auto") {
    // A classifier's quality held at fp16 where a regressor's did not quite
    // (docs/BENCHMARKS.md, "Wire precision").
    const bool classifier = predictor_type != "regressor";
    return job == "linear_learner" && classifier ? proto::WIRE_FP16 : proto::WIRE_FP32;
  }
  proto::WirePrecision precision;
  try {
    precision = ParseWirePrecision(FLAGS_wire_precision);
  } catch (const Error&) {
    throw MakeError("--wire_precision: '", FLAGS_wire_precision,
                    "' is not auto, fp32, bf16 or fp16");
  }
  if (precision != proto::WIRE_FP32 && (job == "exact_sum" || job == "kv_bench")) {
    throw MakeError("--wire_precision=", FLAGS_wire_precision, " is refused by --job=", job,
                    (job == "exact_sum" ? ", which checks the servers' sums exactly"
                                        : ", which measures the float32 transport"),
                    ": its pushes and pulls travel as fp32 (drop the flag or give auto)");
  }
  return precision;
}

float PushFilterThresholdFromFlags(const std::string& job) {
  const double threshold = FLAGS_push_filter_threshold;
  if (!std::isfinite(threshold) || threshold < 0 || threshold > 3.0e38) {
    throw MakeError("--push_filter_threshold=", threshold,
                    ": must be a finite number, at least 0 (0: no filter)");
  }
  if (threshold > 0 && (job == "exact_sum" || job == "kv_bench")) {
    throw MakeError("--push_filter_threshold=", threshold, " is refused by --job=", job,
                    (job == "exact_sum" ? ", which checks the servers' sums exactly"
                                        : ", which measures the transport"),
                    ": every gradient it pushes goes as it is (drop the flag)");
  }
  return static_cast<float>(threshold);
}

}  // namespace keel
