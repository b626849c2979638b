#include <malloc.h>

#include "cli/commands.h"

namespace {

// Messages of up to 32 MiB are received into buffers from the heap, and freed
// memory is kept for the next ones. By default glibc maps such buffers and
// unmaps them when freed (or trims the heap under them), so every large
// message faulted in and zeroed its pages again: a 1 MiB pull ran at 0.4 of
// raw ZeroMQ's rate (docs/BENCHMARKS.md, "KV push/pull against raw ZeroMQ").
// Each arena keeps at most 64 MiB free at its top.
void KeepLargeBuffers() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  KeepLargeBuffers();
  return keel::RunCommandLine(argc, argv);
}
