// Fuzzes ManifestFromJson (io/checkpoint.h), the reading of a checkpoint's
// manifest.json; a manifest it accepts must survive ManifestToJson and back
// unchanged (what a resumed job commits is what it read).
#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstdint>
#include <string>

#include "base/error.h"
#include "fuzz_util.h"
#include "io/checkpoint.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  keel::fuzz::QuietLogging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  keel::proto::CheckpointManifest manifest;
  try {
    manifest = keel::ManifestFromJson(json, "fuzz/manifest.json");
  } catch (const keel::Error&) {
    return 0;
  }
  const keel::proto::CheckpointManifest again =
      keel::ManifestFromJson(keel::ManifestToJson(manifest), "fuzz/again.json");
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);  // "NaN" is a valid JSON double to protobuf
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_field_comparator(&comparator);
  if (!differencer.Compare(manifest, again)) __builtin_trap();
  return 0;
}
