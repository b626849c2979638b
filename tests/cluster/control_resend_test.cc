// Lost control messages: awaited requests are sent again until answered, and
// the scheduler takes each once (ControlReplies), answering a copy again when
// its answer was the one lost.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "cluster_fixture.h"
#include "kv/node.h"
#include "scheduler/control_replies.h"
#include "scheduler/scheduler.h"
#include "test_util.h"

namespace keel {
namespace {

using testing::LocalNode;
using testing::WaitFor;

proto::Meta Request(proto::Command command, uint64_t key) {
  proto::Meta meta;
  meta.set_command(command);
  if (command == proto::BARRIER) {
    meta.set_barrier_id(key);
  } else {
    meta.set_sequence(key);
  }
  return meta;
}

Message Answer(proto::Command command, uint64_t key) {
  Message answer;
  answer.meta = Request(command, key);
  answer.meta.set_error("answer " + std::to_string(key));
  return answer;
}

TEST(ControlReplies, ARequestIsNewThenPendingThenAnsweredWithWhatWentOut) {
  ControlReplies replies;
  EXPECT_EQ(replies.OnRequest(7, Request(proto::CHECKPOINT, 5)), ControlReplies::Seen::kNew);
  EXPECT_EQ(replies.OnRequest(7, Request(proto::CHECKPOINT, 5)), ControlReplies::Seen::kPending);
  replies.OnAnswer(7, Answer(proto::CHECKPOINT, 5));
  EXPECT_EQ(replies.OnRequest(7, Request(proto::CHECKPOINT, 5)), ControlReplies::Seen::kAnswered);
  EXPECT_EQ(replies.answer(7, proto::CHECKPOINT).meta.error(), "answer 5");
}

TEST(ControlReplies, AStaleCopyIsIgnoredAndANewerRequestReplacesTheEntry) {
  ControlReplies replies;
  replies.OnRequest(7, Request(proto::BARRIER, 3));
  replies.OnAnswer(7, Answer(proto::BARRIER, 3));
  EXPECT_EQ(replies.OnRequest(7, Request(proto::BARRIER, 4)), ControlReplies::Seen::kNew);
  EXPECT_EQ(replies.OnRequest(7, Request(proto::BARRIER, 3)), ControlReplies::Seen::kPending);
  // An answer to another request than the one recorded is not kept.
  replies.OnAnswer(7, Answer(proto::BARRIER, 3));
  EXPECT_EQ(replies.OnRequest(7, Request(proto::BARRIER, 4)), ControlReplies::Seen::kPending);
}

TEST(ControlReplies, NodesAndCommandsAreApartAndALeavingNodeIsForgotten) {
  ControlReplies replies;
  replies.OnRequest(7, Request(proto::ORPHANS, 9));
  EXPECT_EQ(replies.OnRequest(8, Request(proto::ORPHANS, 9)), ControlReplies::Seen::kNew);
  EXPECT_EQ(replies.OnRequest(7, Request(proto::BARRIER, 9)), ControlReplies::Seen::kNew);
  replies.Forget(7);
  EXPECT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies.OnRequest(7, Request(proto::ORPHANS, 9)), ControlReplies::Seen::kNew);
}

TransportFaults ControlDrops(uint64_t seed) {
  TransportFaults faults;
  faults.drop_rate = 0.25;
  faults.control = true;
  faults.seed = seed;
  return faults;
}

TEST(ControlResends, BarriersGetThroughWhenAQuarterOfTheControlMessagesAreLost) {
  SchedulerOptions scheduler_options = testing::LocalScheduler(1, 2);
  scheduler_options.faults = ControlDrops(1);
  std::unique_ptr<Scheduler> scheduler = testing::StartScheduler(scheduler_options);
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < 3; ++i) {
    NodeOptions options = LocalNode(i == 0 ? proto::SERVER : proto::WORKER, scheduler->port(), 0.1);
    options.faults = ControlDrops(10 + i);
    nodes.push_back(std::make_unique<Node>(options));
  }
  testing::StartNodes({nodes[0].get(), nodes[1].get(), nodes[2].get()});

  constexpr int kBarriers = 8;
  std::vector<std::thread> workers;
  std::vector<int> passed(2, 0);
  std::vector<std::string> errors(2);
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      try {
        for (int b = 0; b < kBarriers; ++b) {
          nodes[1 + w]->Barrier(kWorkerGroup, 60);
          ++passed[w];
        }
      } catch (const Error& e) {
        errors[w] = e.what();
      }
    });
  }
  for (auto& thread : workers) thread.join();
  EXPECT_EQ(passed, std::vector<int>(2, kBarriers)) << errors[0] << " " << errors[1];
  uint64_t dropped = 0;
  for (auto& node : nodes) dropped += node->transport_fault_counts().dropped;
  EXPECT_GT(dropped, 0u) << "no control message was lost: the test proves nothing";
  for (auto& node : nodes) node->Stop();
  scheduler->Stop();
}

}  // namespace
}  // namespace keel
