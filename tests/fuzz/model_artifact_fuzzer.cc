// Fuzzes ModelArtifact::Read (worker/model_artifact.h), what `keel predict`
// loads from --model_dir. Input: weights.bin, then optionally the separator
// below and model.json. The harness rewrites weights.bin's last 8 bytes as
// the checksum of the rest (an attacker can compute it too), so the fuzzer
// reaches the header checks behind it.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "base/error.h"
#include "fuzz_util.h"
#include "worker/model_artifact.h"

namespace {

constexpr std::string_view kSeparator = "\n--model.json--\n";

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  keel::fuzz::QuietLogging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t cut = input.find(kSeparator);
  const std::string_view weights = input.substr(0, cut);
  const std::string& folder = keel::fuzz::ScratchFolder();
  keel::fuzz::WriteScratchFile(
      folder + "/weights.bin",
      keel::fuzz::WithValidChecksum(reinterpret_cast<const uint8_t*>(weights.data()),
                                    weights.size()));
  const std::string json_path = folder + "/model.json";
  if (cut == std::string_view::npos) {
    std::remove(json_path.c_str());
  } else {
    keel::fuzz::WriteScratchFile(json_path, std::string(input.substr(cut + kSeparator.size())));
  }
  try {
    const keel::ModelArtifact model = keel::ModelArtifact::Read(folder);
    if (model.weights.size() !=
        model.features.size() * static_cast<size_t>(model.hyperparameters.weight_width())) {
      __builtin_trap();
    }
  } catch (const keel::Error&) {
  }
  return 0;
}
