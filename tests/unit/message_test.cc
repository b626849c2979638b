#include "kv/message.h"

#include <gtest/gtest.h>

#include <cstring>

#include "base/error.h"

namespace keel {
namespace {

Message PushMessage(std::vector<Key> keys, std::vector<float> values, uint32_t width) {
  Message message;
  message.meta.set_command(proto::PUSH);
  message.meta.set_sender(4);
  message.meta.set_sequence(99);
  message.meta.set_epoch(2);
  message.meta.set_key_count(keys.size());
  message.meta.set_value_width(width);
  message.meta.set_table(3);
  message.frames.push_back(AsBytes(SharedArray<Key>(std::move(keys))));
  message.frames.push_back(AsBytes(SharedArray<float>(std::move(values))));
  return message;
}

// Encodes and decodes, as the wire does.
Message RoundTrip(const Message& message) { return Decode(Encode(message)); }

void ExpectRejected(const Message& message, const std::string& reason) {
  try {
    ParseDataRequest(message);
    FAIL() << "accepted a request that should fail with: " << reason;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

TEST(Message, RoundTripsMetaAndFrames) {
  std::vector<Key> keys(3000);
  std::vector<float> values(6000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i * 7 + 1;
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i);
  const Message decoded = RoundTrip(PushMessage(keys, values, 2));
  EXPECT_EQ(decoded.meta.command(), proto::PUSH);
  EXPECT_EQ(decoded.meta.sender(), 4);
  EXPECT_EQ(decoded.meta.sequence(), 99u);
  EXPECT_EQ(decoded.meta.epoch(), 2u);
  EXPECT_EQ(decoded.meta.table(), 3u);
  const DataRequest request = ParseDataRequest(decoded);
  ASSERT_EQ(request.keys.size(), keys.size());
  ASSERT_EQ(request.values.size(), values.size());
  EXPECT_EQ(std::memcmp(request.keys.data(), keys.data(), keys.size() * sizeof(Key)), 0);
  EXPECT_EQ(std::memcmp(request.values.data(), values.data(), values.size() * sizeof(float)), 0);
  EXPECT_EQ(request.width, 2u);
}

TEST(Message, RoundTripsAControlMessageWithAView) {
  Message message;
  message.meta.set_command(proto::VIEW);
  auto* node = message.meta.mutable_view()->add_nodes();
  node->set_role(proto::SERVER);
  node->set_address("10.0.0.1:9000");
  message.meta.mutable_view()->set_epoch(5);
  const Message decoded = RoundTrip(message);
  EXPECT_EQ(decoded.meta.view().epoch(), 5u);
  EXPECT_EQ(decoded.meta.view().nodes(0).address(), "10.0.0.1:9000");
  EXPECT_TRUE(decoded.frames.empty());
}

TEST(Message, DecodeRejectsAFrameThatIsNotAMeta) {
  std::vector<zmq::message_t> frames;
  const char garbage[] = "\xff\xff\xff\xff\xff";
  frames.emplace_back(garbage, 5);
  EXPECT_THROW(Decode(std::move(frames)), Error);
  EXPECT_THROW(Decode({}), Error);
}

TEST(Message, CopiesUnalignedFramesBeforeReadingKeys) {
  std::vector<char> bytes(8 * 2 + 1);
  const Key keys[2] = {5, 6};
  std::memcpy(bytes.data() + 1, keys, sizeof(keys));
  Message message;
  message.meta.set_command(proto::PULL);
  message.meta.set_key_count(2);
  message.meta.set_value_width(1);
  SharedArray<char> all(std::move(bytes));
  message.frames.push_back(all.Slice(1, 17));
  const DataRequest request = ParseDataRequest(message);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(request.keys.data()) % alignof(Key), 0u);
  EXPECT_EQ(request.keys[0], 5u);
  EXPECT_EQ(request.keys[1], 6u);
}

TEST(ParseDataRequest, RejectsATruncatedKeyFrame) {
  Message message = PushMessage({1, 2, 3}, {1, 2, 3}, 1);
  message.frames[0] = message.frames[0].Slice(0, 20);
  ExpectRejected(message, "key frame has 20 bytes");
}

TEST(ParseDataRequest, RejectsAKeyCountThatDisagreesWithTheFrame) {
  Message message = PushMessage({1, 2, 3}, {1, 2, 3}, 1);
  message.meta.set_key_count(4);
  ExpectRejected(message, "key_count 4");
}

TEST(ParseDataRequest, RejectsAValueFrameOfTheWrongSize) {
  ExpectRejected(PushMessage({1, 2, 3}, {1, 2}, 1),
                 "value frame of 3 keys x width 1 has 8 bytes; 3 values of fp32 need 12");
  ExpectRejected(PushMessage({1, 2, 3}, {1, 2, 3}, 2), "width 2");
}

TEST(ParseDataRequest, RejectsMissingFrames) {
  Message message = PushMessage({1, 2}, {1, 2}, 1);
  message.frames.pop_back();
  ExpectRejected(message, "needs 2 data frames, got 1");
}

TEST(ParseDataRequest, RejectsUnsortedOrRepeatedKeys) {
  ExpectRejected(PushMessage({1, 3, 2}, {1, 2, 3}, 1),
                 "not sorted strictly ascending at position 2");
  ExpectRejected(PushMessage({1, 1}, {1, 2}, 1), "position 1");
}

TEST(ParseDataRequest, RejectsAnUnknownCommand) {
  Message message = PushMessage({1}, {1}, 1);
  message.meta.set_command(static_cast<proto::Command>(77));
  ExpectRejected(message, "unknown data command 77");
}

TEST(ParseDataRequest, RejectsAZeroOrHugeWidth) {
  ExpectRejected(PushMessage({1}, {}, 0), "value_width 0");
  Message message = PushMessage({1}, {1}, 1);
  message.meta.set_value_width(kMaxValueWidth + 1);
  ExpectRejected(message, "is outside");
}

TEST(ParseDataRequest, RejectsMoreKeysTimesWidthThanOneRequestMayCarry) {
  // Each key and width is within bounds, the product is not: 2^16 keys of
  // width 2^12 would need a response of 2^28 floats (1 GiB).
  std::vector<Key> keys(1 << 16);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
  Message message;
  message.meta.set_command(proto::PULL);
  message.meta.set_key_count(keys.size());
  message.meta.set_value_width(1 << 12);
  message.frames.push_back(AsBytes(SharedArray<Key>(std::move(keys))));
  ExpectRejected(message, "65536 keys x width 4096");
}

TEST(ParseDataRequest, AcceptsARequestAtTheBound) {
  Message message;
  message.meta.set_command(proto::PULL);
  message.meta.set_key_count(1);
  message.meta.set_value_width(kMaxValueWidth);
  message.frames.push_back(AsBytes(SharedArray<Key>(std::vector<Key>{7})));
  EXPECT_EQ(ParseDataRequest(message).width, kMaxValueWidth);
}

}  // namespace
}  // namespace keel
