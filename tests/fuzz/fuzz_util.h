// What the libFuzzer targets of tests/fuzz share: quiet logging, a scratch
// folder for the decoders that read files, and the checksum fix-up that lets
// a target reach past a checksummed file's integrity check.
//
// A target feeds one input to one decoder and accepts exactly one outcome for
// bad input: keel::Error. Any other exception, a crash, a sanitizer report, a
// hang or an allocation over libFuzzer's -malloc_limit_mb is a bug.
#ifndef KEEL_TESTS_FUZZ_FUZZ_UTIL_H_
#define KEEL_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace keel::fuzz {

// Silences glog below FATAL (a decoder's warnings would flood the run).
void QuietLogging();

// A folder of this process's own, made on first use under $TMPDIR (or /tmp)
// and removed at exit.
const std::string& ScratchFolder();

// Writes `bytes` to `path`, replacing it. Aborts if it cannot (the harness's
// own failure, not the decoder's).
void WriteScratchFile(const std::string& path, const std::string& bytes);

// `data` with its last 8 bytes replaced by Checksum64 of the bytes before
// them (inputs shorter than 8 bytes are returned as they are): the fuzzer
// then explores the structure behind the checksum, as an attacker who can
// compute the checksum would.
std::string WithValidChecksum(const uint8_t* data, size_t size);

}  // namespace keel::fuzz

#endif  // KEEL_TESTS_FUZZ_FUZZ_UTIL_H_
