#include "base/mapped_read.h"

#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cstring>

namespace keel {
namespace {

// Where the calling thread's guarded read jumps back to on SIGBUS; null
// outside one. Set before the fault, so the handler reads it without the
// thread-local storage being allocated there.
thread_local sigjmp_buf* guarded_read = nullptr;
// The SIGBUS action this process had before ReadMapped installed its own.
struct sigaction previous_action;

void OnBusError(int signal, siginfo_t* info, void* context) {
  if (sigjmp_buf* jump = guarded_read) {
    guarded_read = nullptr;
    siglongjmp(*jump, 1);
  }
  if ((previous_action.sa_flags & SA_SIGINFO) != 0) {
    previous_action.sa_sigaction(signal, info, context);
    return;
  }
  if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
    previous_action.sa_handler(signal);
    return;
  }
  // No handler before this one: the default action ends the process. (A
  // fault cannot be ignored: returning would run the access again.)
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigaction(SIGBUS, &fallback, nullptr);
  raise(SIGBUS);
}

void InstallHandler() {
  static const bool installed = [] {
    struct sigaction action {};
    action.sa_sigaction = OnBusError;
    // SA_NODEFER: SIGBUS stays unblocked when the handler jumps out, so the
    // jump need not restore the signal mask (a system call per read).
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGBUS, &action, &previous_action) == 0;
  }();
  (void)installed;
}

}  // namespace

bool ReadMapped(void (*read)(void* context), void* context) {
  InstallHandler();
  sigjmp_buf jump;
  if (sigsetjmp(jump, /*savemask=*/0) != 0) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    return false;  // the handler has cleared guarded_read
  }
  guarded_read = &jump;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  read(context);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  guarded_read = nullptr;
  return true;
}

bool CopyMapped(void* to, const void* from, size_t bytes) {
  struct Copy {
    void* to;
    const void* from;
    size_t bytes;
  } copy{to, from, bytes};
  return ReadMapped(
      [](void* context) {
        const Copy* copy = static_cast<const Copy*>(context);
        std::memcpy(copy->to, copy->from, copy->bytes);
      },
      &copy);
}

}  // namespace keel
