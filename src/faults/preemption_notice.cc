#include "faults/preemption_notice.h"

#include <glog/logging.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <exception>

#include "kv/node.h"

namespace keel {
namespace {

// Signal handlers can only reach process-wide state; a lock-free atomic is
// safe in a handler and read by the watch's thread without a race.
std::atomic<int> term_signals{0};
static_assert(std::atomic<int>::is_always_lock_free, "signal handlers need a lock-free atomic");

void OnTerm(int /*signal*/) {
  if (term_signals.exchange(1) > 0) _exit(kPreemptedExitStatus);  // the second: stop at once
}

void OnInterrupt(int signal) {
  if (term_signals.load() > 0) _exit(kPreemptedExitStatus);
  ::signal(signal, SIG_DFL);  // before any notice: the default, at once
  raise(signal);
}

}  // namespace

void InstallPreemptionHandlers() {
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = OnTerm;
  sigaction(SIGTERM, &action, nullptr);
  action.sa_handler = OnInterrupt;
  sigaction(SIGINT, &action, nullptr);
  // `keel launch` starts its roles with SIGTERM blocked (ProcessGroup::
  // DeferNotices): one that came meanwhile is delivered now, to the handler.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
}

std::string PreemptedLine(const std::string& checkpoint, const std::string& uri,
                          const std::string& note) {
  if (checkpoint.empty()) {
    return "preempted (exit status " + std::to_string(kPreemptedExitStatus) + "): " + note;
  }
  return "preempted (exit status " + std::to_string(kPreemptedExitStatus) + "): checkpoint " +
         checkpoint + " committed in " + uri + "; resume with the same command and --resume=latest";
}

PreemptionWatch::PreemptionWatch(std::function<void()> on_notice)
    : on_notice_(std::move(on_notice)) {
  InstallPreemptionHandlers();
  thread_ = std::thread([this] {
    while (!stopping_.load()) {
      if (term_signals.load() > 0) {
        try {
          on_notice_();
        } catch (const std::exception& e) {  // a node already stopped, say
          LOG(WARNING) << "preemption notice not passed on: " << e.what();
        }
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
}

PreemptionWatch::~PreemptionWatch() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

bool EndedByPreemption(Node* node, double preemption_grace_s) {
  if (!node->preempting() && !node->shutdown_requested()) return false;
  node->WaitForShutdown(preemption_grace_s + 10);
  std::string checkpoint, uri;
  if (!node->preempted(&checkpoint, &uri)) return false;
  LOG(WARNING) << "worker " << node->rank() << ": "
               << PreemptedLine(checkpoint, uri, "no checkpoint committed");
  return true;
}

}  // namespace keel
