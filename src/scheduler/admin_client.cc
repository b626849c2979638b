#include "scheduler/admin_client.h"

#include <chrono>
#include <random>
#include <thread>

#include "base/error.h"
#include "base/time.h"
#include "kv/node.h"
#include "kv/van.h"

namespace keel {

void RequestDrain(const std::string& scheduler, int rank,
                  const std::optional<ClusterSecret>& secret, double timeout_s) {
  if (rank < 0) throw MakeError("--rank: say which server to drain (0, 1, ...)");
  VanOptions options;
  options.bind_host = "127.0.0.1";  // it takes answers on its own connection only
  options.secret = secret;
  Van van(options);
  van.Connect(kSchedulerId, scheduler);
  van.Start([](Message&&) {});
  Message request;
  request.meta.set_command(proto::DRAIN);
  request.meta.set_drain_rank(rank);
  request.meta.set_sequence(std::random_device()() | 1u);
  const double deadline = MonotonicSeconds() + timeout_s;
  double next_send = 0;
  while (MonotonicSeconds() < deadline) {
    if (MonotonicSeconds() >= next_send) {
      van.Send(kSchedulerId, request);  // again if unanswered: a drain asked twice starts once
      next_send = MonotonicSeconds() + 1;
    }
    Message reply;
    while (van.TakeReply(kSchedulerId, &reply)) {
      if (reply.meta.command() != proto::DRAIN ||
          reply.meta.sequence() != request.meta.sequence()) {
        continue;
      }
      van.Stop();
      if (!reply.meta.error().empty()) {
        throw MakeError("the scheduler at ", scheduler, " refused to drain server ", rank, ": ",
                        reply.meta.error());
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  van.Stop();
  throw MakeError("no answer from the scheduler at ", scheduler, " within ", timeout_s,
                  " s (is it running, and is --secret_file the cluster's?)");
}

}  // namespace keel
