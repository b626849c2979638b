// What the fuzz targets of tests/fuzz found, each as the input that showed it,
// decoded the way the target decoded it. Undefined behaviour shows only in the
// clang tree (scripts/sanitize_build.sh: UBSan makes it fatal); the expected
// outcomes hold in every build.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "io/checkpoint.h"

namespace keel {
namespace {

// fuzz_snapshot: a table of 0 rows read its keys and rows with memcpy into
// the null data() of an empty vector, undefined even for 0 bytes.
TEST(FuzzFindings, SnapshotWithAnEmptyTableDecodes) {
  ServerSnapshot snapshot;
  snapshot.server_rank = 2;
  SnapshotTable empty;
  empty.table = 3;
  empty.weight_width = 1;
  empty.row_width = 2;
  snapshot.tables.push_back(empty);
  const ServerSnapshot decoded = DecodeSnapshot(EncodeSnapshot(snapshot, nullptr), "empty.snap");
  ASSERT_EQ(decoded.tables.size(), 1u);
  EXPECT_EQ(decoded.tables[0].table, 3u);
  EXPECT_EQ(decoded.tables[0].row_width, 2u);
  EXPECT_TRUE(decoded.tables[0].keys.empty());
  EXPECT_TRUE(decoded.tables[0].rows.empty());
}

// fuzz_manifest: a file's member named "" (unknown to Keel, so ignored) was
// kept by protobuf's JSON parser as an unknown field, which ManifestToJson
// does not write: the manifest written again from the one read differed from
// it (a resumed job commits what it read). Unknown members are now dropped.
TEST(FuzzFindings, AManifestReadIsTheManifestItWritesAgain) {
  const std::string json =
      "{\"format_version\": 1, \"id\": \"ckpt-000002-000000000\", \"num_servers\": 1,\n"
      " \"num_workers\": 1, \"files\": [{\"name\": \"server-0.snap\", \"server_rank\": 0,\n"
      " \"\": [{\"first\": \"0\", \"last\": \"9\"}], \"bytes\": \"4096\", \"rows\": \"100\"}]}";
  const auto manifest = ManifestFromJson(json, "ckpt/manifest.json");
  const auto again = ManifestFromJson(ManifestToJson(manifest), "again");
  EXPECT_EQ(manifest.SerializeAsString(), again.SerializeAsString())
      << manifest.DebugString() << "\n" << again.DebugString();
}

// fuzz_manifest: a trainer's best_loss of -0 was written "-0", which
// protobuf's JSON parser reads as 0: the manifest written again differed.
// A manifest read holds 0 for every -0, in maps and lists too.
TEST(FuzzFindings, AManifestsNegativeZerosAreReadAsZero) {
  const std::string json =
      "{\"format_version\": 1, \"id\": \"ckpt-000003-000000000\", \"epoch\": 3,\n"
      " \"workers\": [{\"rank\": 0, \"epoch\": 3, \"loss\": -0.0, \"model_losses\": [-0, 1]}],\n"
      " \"trainer\": {\"best_loss\": -0e308, \"metrics\": {\"validation:loss\": -0}}}";
  const auto manifest = ManifestFromJson(json, "ckpt/manifest.json");
  const std::string written = ManifestToJson(manifest);
  EXPECT_EQ(written.find(": -0"), std::string::npos) << written;
  EXPECT_EQ(written.find(" -0,"), std::string::npos) << written;
  EXPECT_EQ(ManifestToJson(ManifestFromJson(written, "again")), written);
}

// A file name with a control character names no snapshot file (and a NUL
// would cut the path short on the file system): refused, naming the field.
TEST(FuzzFindings, AManifestFileNameWithAControlCharacterIsRefusedNamingTheField) {
  for (const std::string& name : {std::string("server-0\n.snap"), std::string("server-0") + '\0' +
                                                                  ".snap"}) {
    const std::string json = "{\"format_version\": 1, \"id\": \"ckpt-000002-000000000\",\n"
                             " \"num_servers\": 1, \"num_workers\": 1, \"files\": [\n"
                             "  {\"name\": \"" + name + "\", \"server_rank\": 0,"
                             " \"bytes\": \"4096\", \"rows\": \"100\"}]}";
    try {
      ManifestFromJson(json, "ckpt/manifest.json");
      FAIL() << "accepted a file name with a control character";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("ckpt/manifest.json: files[0].name"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace keel
