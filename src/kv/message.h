// A Keel message: a Protobuf Meta plus raw data frames, and its wire form.
//
// On the wire a message is a ZeroMQ multipart message: frame 0 is the
// serialized Meta, then one frame per data array. Data frames are sent without
// copying when they are large (the transport holds a reference to the array).
#ifndef KEEL_KV_MESSAGE_H_
#define KEEL_KV_MESSAGE_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "keel.pb.h"
#include "kv/keys.h"
#include "kv/shared_array.h"

namespace keel {

using Bytes = SharedArray<char>;

struct Message {
  proto::Meta meta;
  std::vector<Bytes> frames;
  // Set by the transport on a received message: the connection it came on
  // (for Van::Reply; the sending socket's routing id, see Van) and the IP
  // address of the host that sent it. `route` is empty on a reply taken from
  // one of this node's own send sockets (Van::TakeReply): it came back on a
  // connection this node opened to the address it chose.
  std::string route;
  std::string peer_host;
  // Set by its sender (not sent): the message goes again until answered, or
  // periodically (a heartbeat), or it answers such a one, so losing it only
  // delays. Fault injection drops and delays such control messages too when
  // told to (TransportFaults::control); the rest of the control plane never.
  bool sent_until_answered = false;
};

// A message carrying `command` and nothing else yet: the start of a control
// message (the sender fills in the rest).
inline Message CommandMessage(proto::Command command) {
  Message message;
  message.meta.set_command(command);
  return message;
}

// Wraps a typed array as a data frame (no copy).
template <typename T>
Bytes AsBytes(const SharedArray<T>& array) {
  using Mutable = std::remove_const_t<T>;
  return Bytes(array.owner(), reinterpret_cast<char*>(const_cast<Mutable*>(array.data())),
               array.bytes());
}

// The wire form of `message`: the Meta frame followed by its data frames.
std::vector<zmq::message_t> Encode(const Message& message);

// Parses frames produced by Encode. Throws Error if there is no frame or the
// Meta frame does not parse.
Message Decode(std::vector<zmq::message_t>&& frames);

// Largest row a request may carry, in floats (256 MiB).
constexpr uint32_t kMaxValueWidth = 64u << 20;
// Most values one PUSH or PULL may carry or ask for: keys x width, in floats
// (512 MiB). A server allocates a pull's answer before sending it: the bound
// keeps one request from taking more than that.
constexpr uint64_t kMaxRequestValues = uint64_t{1} << 27;
// Most bytes of rows (keys and floats) one DUMP answer or one page of a
// REPLICA_SYNC copy carries: a whole table or range comes in pages, so no
// frame on the wire is larger than a PUSH's or PULL's.
constexpr size_t kPageBytes = size_t{256} << 20;
// Rows of `row_floats` floats (and their keys) that fit in `page_bytes`; at
// least one.
inline size_t RowsPerPage(size_t page_bytes, uint64_t row_floats) {
  const uint64_t row_bytes = sizeof(Key) + row_floats * sizeof(float);
  return static_cast<size_t>(std::max<uint64_t>(1, page_bytes / row_bytes));
}

// A PUSH or PULL request whose frames have been checked against its Meta.
struct DataRequest {
  SharedArray<const Key> keys;
  SharedArray<const float> values;  // PUSH only: keys.size() * width floats
  // A PUSH passed down a chain: keys whose rows the primary evicted after
  // applying it, and keys it did not admit.
  SharedArray<const Key> evicted;
  SharedArray<const Key> unadmitted;
  uint32_t width = 0;
  uint32_t table = 0;
};

// Checks a PUSH, PULL or DUMP request: known command, frame count, width in
// 1..kMaxValueWidth, key_count x width at most kMaxRequestValues, frame sizes
// that match key_count, value_width and precision (a 16-bit PUSH's values
// are widened to float32), keys sorted strictly ascending (not
// checked again with `keys_checked`: keys a server kept, see Meta.key_list).
// Throws Error naming the first problem found.
DataRequest ParseDataRequest(const Message& message, bool keys_checked = false);

// A short description for logs: "PUSH from 3 seq 17 (epoch 1, 100 keys x 1)".
std::string Describe(const proto::Meta& meta);

}  // namespace keel

#endif  // KEEL_KV_MESSAGE_H_
