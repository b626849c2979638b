#include "kv/message.h"

#include <memory>
#include <sstream>

#include "base/error.h"
#include "kv/wire_precision.h"

namespace keel {
namespace {

// Frames below this size are copied into ZeroMQ's own buffer; above it the
// transport keeps a reference to the array instead.
constexpr size_t kZeroCopyThreshold = 4096;

void ReleaseOwner(void* /*data*/, void* hint) {
  delete static_cast<std::shared_ptr<const void>*>(hint);
}

zmq::message_t ToFrame(const Bytes& bytes) {
  if (bytes.size() < kZeroCopyThreshold || !bytes.owner()) {
    return zmq::message_t(bytes.data(), bytes.size());
  }
  auto* hint = new std::shared_ptr<const void>(bytes.owner());
  return zmq::message_t(bytes.data(), bytes.size(), ReleaseOwner, hint);
}

}  // namespace

std::vector<zmq::message_t> Encode(const Message& message) {
  std::vector<zmq::message_t> frames;
  frames.reserve(1 + message.frames.size());
  std::string meta = message.meta.SerializeAsString();
  frames.emplace_back(meta.data(), meta.size());
  for (const Bytes& bytes : message.frames) frames.push_back(ToFrame(bytes));
  return frames;
}

Message Decode(std::vector<zmq::message_t>&& frames) {
  if (frames.empty()) throw MakeError("empty message (no Meta frame)");
  Message message;
  if (!message.meta.ParseFromArray(frames[0].data(), static_cast<int>(frames[0].size()))) {
    throw MakeError("frame 0 (", frames[0].size(), " bytes) is not a Meta");
  }
  message.frames.reserve(frames.size() - 1);
  for (size_t i = 1; i < frames.size(); ++i) {
    auto owned = std::make_shared<zmq::message_t>(std::move(frames[i]));
    char* data = static_cast<char*>(owned->data());
    size_t size = owned->size();
    message.frames.emplace_back(std::move(owned), data, size);
  }
  return message;
}

namespace {

// The frame at `*index` as `count` keys sorted strictly ascending (none for
// count 0); moves `*index` past it.
SharedArray<const Key> KeyListFrame(const Message& message, uint64_t count, const char* what,
                                    size_t* index) {
  if (count == 0) return {};
  const Bytes& frame = message.frames[(*index)++];
  if (frame.size() % sizeof(Key) != 0 || frame.size() / sizeof(Key) != count) {
    throw MakeError(what, " key frame has ", frame.size(), " bytes, ", what, "_count ", count,
                    " needs ", count * sizeof(Key));
  }
  SharedArray<const Key> keys = frame.As<const Key>();
  for (size_t i = 1; i < keys.size(); ++i) {
    if (keys[i] <= keys[i - 1]) {
      throw MakeError(what, " keys are not sorted strictly ascending at position ", i);
    }
  }
  return keys;
}

}  // namespace

DataRequest ParseDataRequest(const Message& message, bool keys_checked) {
  const proto::Meta& meta = message.meta;
  const bool push = meta.command() == proto::PUSH;
  const bool dump = meta.command() == proto::DUMP;
  if (!push && !dump && meta.command() != proto::PULL) {
    throw MakeError("unknown data command ", static_cast<int>(meta.command()));
  }
  if (dump) {
    if (!message.frames.empty()) throw MakeError("DUMP takes no data frames");
    if (meta.value_width() == 0 || meta.value_width() > kMaxValueWidth) {
      throw MakeError("value_width ", meta.value_width(), " is outside 1..", kMaxValueWidth);
    }
    DataRequest request;
    request.width = meta.value_width();
    request.table = meta.table();
    return request;
  }
  if ((meta.evicted_count() > 0 || meta.unadmitted_count() > 0) && !push) {
    throw MakeError("only a PUSH carries evicted or unadmitted keys");
  }
  const size_t expected_frames =
      push ? 2 + (meta.evicted_count() > 0 ? 1 : 0) + (meta.unadmitted_count() > 0 ? 1 : 0) : 1;
  if (message.frames.size() != expected_frames) {
    throw MakeError(proto::Command_Name(meta.command()), " needs ", expected_frames,
                    " data frames, got ", message.frames.size());
  }
  if (meta.value_width() == 0 || meta.value_width() > kMaxValueWidth) {
    throw MakeError("value_width ", meta.value_width(), " is outside 1..", kMaxValueWidth);
  }
  if (meta.key_count() > kMaxRequestValues / meta.value_width()) {
    throw MakeError(meta.key_count(), " keys x width ", meta.value_width(), " is more than the ",
                    kMaxRequestValues, " values one request may carry");
  }
  DataRequest request;
  request.width = meta.value_width();
  request.table = meta.table();
  const Bytes& key_frame = message.frames[0];
  if (key_frame.size() != meta.key_count() * sizeof(Key)) {
    throw MakeError("key frame has ", key_frame.size(), " bytes, key_count ", meta.key_count(),
                    " needs ", meta.key_count() * sizeof(Key));
  }
  request.keys = key_frame.As<const Key>();
  for (size_t i = 1; !keys_checked && i < request.keys.size(); ++i) {
    if (request.keys[i] <= request.keys[i - 1]) {
      throw MakeError("keys are not sorted strictly ascending at position ", i);
    }
  }
  if (!proto::WirePrecision_IsValid(meta.precision())) {
    throw MakeError("unknown wire precision ", static_cast<int>(meta.precision()),
                    " (fp32, bf16 and fp16 are known)");
  }
  if (push) {
    // 16-bit values are widened to float32 here: the server applies floats.
    request.values =
        WidenValues(message.frames[1], meta.key_count() * uint64_t{request.width}, meta.precision(),
                    "value frame of " + std::to_string(meta.key_count()) + " keys x width " +
                        std::to_string(request.width));
  }
  size_t next_frame = 2;
  request.evicted = KeyListFrame(message, meta.evicted_count(), "evicted", &next_frame);
  request.unadmitted = KeyListFrame(message, meta.unadmitted_count(), "unadmitted", &next_frame);
  return request;
}

std::string Describe(const proto::Meta& meta) {
  std::ostringstream out;
  out << (proto::Command_IsValid(meta.command()) ? proto::Command_Name(meta.command())
                                                 : "command " + std::to_string(meta.command()))
      << (meta.response() ? " response" : "") << " from node " << meta.sender() << " seq "
      << meta.sequence() << " (epoch " << meta.epoch() << ", " << meta.key_count() << " keys x "
      << meta.value_width() << ")";
  return out.str();
}

}  // namespace keel
