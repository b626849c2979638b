#include "cli/wire_flags.h"

#include "base/error.h"
#include "kv/wire_precision.h"

DEFINE_string(wire_precision, "fp32",
              "worker: how training pushes (gradients) and pulls (weights) travel: fp32, bf16 "
              "or fp16 (16-bit values, half the bytes; the servers widen them and keep float32 "
              "state; fp16 saturates past +-65504). Refused by --job=exact_sum and kv_bench, "
              "which keep fp32");

namespace keel {

std::vector<FlagGroup> WireFlagGroups() { return {{"wire precision", {"wire_precision"}}}; }

proto::WirePrecision WirePrecisionFromFlags(const std::string& job) {
  proto::WirePrecision precision;
  try {
    precision = ParseWirePrecision(FLAGS_wire_precision);
  } catch (const Error& e) {
    throw MakeError("--wire_precision: ", e.what());
  }
  if (precision != proto::WIRE_FP32 && (job == "exact_sum" || job == "kv_bench")) {
    throw MakeError("--wire_precision=", FLAGS_wire_precision, " is refused by --job=", job,
                    (job == "exact_sum" ? ", which checks the servers' sums exactly"
                                        : ", which measures the float32 transport"),
                    ": its pushes and pulls travel as fp32 (drop the flag)");
  }
  return precision;
}

}  // namespace keel
