// Fuzzes what a node does with a ZeroMQ multipart message from the network:
// Decode (the Meta frame), then ParseDataRequest (a PUSH, PULL or DUMP's
// frames against its Meta), then Describe (the log line).
//
// Input: byte 0 is the frame count (mod 8); each frame but the last is a
// little-endian uint32 length and that many bytes (cut short at the input's
// end); the last frame is the rest. make_seeds writes seeds in this form.
#include <cstdint>
#include <cstring>
#include <vector>
#include <zmq.hpp>

#include "base/error.h"
#include "fuzz_util.h"
#include "kv/message.h"

namespace {

std::vector<zmq::message_t> SplitFrames(const uint8_t* data, size_t size) {
  std::vector<zmq::message_t> frames;
  if (size == 0) return frames;
  const size_t count = data[0] % 8;
  size_t at = 1;
  for (size_t i = 0; i + 1 < count; ++i) {
    uint32_t length = 0;
    const size_t header = std::min(sizeof(length), size - at);
    std::memcpy(&length, data + at, header);
    at += header;
    const size_t taken = std::min<size_t>(length, size - at);
    frames.emplace_back(data + at, taken);
    at += taken;
  }
  if (count > 0) frames.emplace_back(data + at, size - at);
  return frames;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  keel::fuzz::QuietLogging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  keel::Message message;
  try {
    message = keel::Decode(SplitFrames(data, size));
  } catch (const keel::Error&) {
    return 0;
  }
  (void)keel::Describe(message.meta);
  try {
    const keel::DataRequest request = keel::ParseDataRequest(message);
    // Every key and value the request claims must be readable.
    uint64_t sum = 0;
    for (size_t i = 0; i < request.keys.size(); ++i) sum += request.keys[i];
    float total = 0;
    for (size_t i = 0; i < request.values.size(); ++i) total += request.values[i];
    if (request.values.size() != 0 &&
        request.values.size() != request.keys.size() * uint64_t{request.width}) {
      __builtin_trap();  // a PUSH whose values do not match its keys x width
    }
    (void)sum;
    (void)total;
  } catch (const keel::Error&) {
  }
  return 0;
}
