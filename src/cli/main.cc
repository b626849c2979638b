#include <malloc.h>

#include <chrono>
#include <thread>

#include "cli/commands.h"

namespace {

// How often memory left free on the heap is given back to the system.
constexpr auto kTrimInterval = std::chrono::seconds(10);

// Messages of up to 32 MiB are received into buffers from the heap, which
// keeps up to 64 MiB free at its top for the next ones (below that, two 16 MiB
// messages freed trimmed it and the next faulted in again). By default glibc maps
// such buffers and unmaps them when freed (or trims the heap under them), so
// every large message faulted in and zeroed its pages again: a 1 MiB pull ran
// at 0.4-0.5 of raw ZeroMQ's rate (docs/BENCHMARKS.md, "Throughput", Round 3).
// What stays free after a burst (a backlog of large messages; a table's
// arrays before it grew) is given back every kTrimInterval (malloc_trim),
// since the heaps of threads other than main's seldom shrink by themselves.
void KeepLargeBuffers() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  std::thread([] {
    while (true) {
      std::this_thread::sleep_for(kTrimInterval);
      malloc_trim(0);
    }
  }).detach();
}

}  // namespace

int main(int argc, char** argv) {
  KeepLargeBuffers();
  return keel::RunCommandLine(argc, argv);
}
