// Reads of a file mapped into memory that another process may truncate.
//
// A page of a mapping past its file's end (the file was cut short after it
// was mapped) raises SIGBUS when touched, and SIGBUS ends the process without
// a word. ReadMapped runs a read with that fault turned into a false return,
// so the caller can throw an Error naming the file. A size check before the
// read would leave a window (the file can shrink during the read); the fault
// itself is the only exact test.
//
// How: a SIGBUS handler, installed by the first call in the process, jumps
// back out of a read that a thread runs under ReadMapped. A SIGBUS anywhere
// else goes to the handler that was there before it (by default the process
// ends, as it would have without this one). The handler is process-wide state
// by nature; each thread's guarded read is its own.
//
// Thread-safe.
#ifndef KEEL_BASE_MAPPED_READ_H_
#define KEEL_BASE_MAPPED_READ_H_

#include <cstddef>

namespace keel {

// Calls `read(context)`; true if it ran to its end, false if it raised
// SIGBUS. A faulting read is abandoned where it faulted, so it must only read
// and write plain memory: no allocation, no lock, no object with a destructor.
bool ReadMapped(void (*read)(void* context), void* context);

// The same for a callable, such as a lambda capturing by reference.
template <typename Read>
bool ReadMapped(Read& read) {
  return ReadMapped([](void* context) { (*static_cast<Read*>(context))(); }, &read);
}

// Copies `bytes` bytes from the mapping at `from` to `to`; false if the
// mapped file no longer holds them.
bool CopyMapped(void* to, const void* from, size_t bytes);

}  // namespace keel

#endif  // KEEL_BASE_MAPPED_READ_H_
