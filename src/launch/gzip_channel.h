// A channel of gzip files (SageMaker's CompressionType Gzip) unpacked into a
// folder before training: Keel's readers split files by byte ranges, which a
// gzip stream cannot be.
#ifndef KEEL_LAUNCH_GZIP_CHANNEL_H_
#define KEEL_LAUNCH_GZIP_CHANNEL_H_

#include <string>

namespace keel {

// Unpacks every file of `folder` (as ListInputs lists them) into `into`
// (made if missing), each under its name without a ".gz" ending, and returns
// the bytes written. A file that is not gzip is refused: SageMaker's Gzip
// says every object is. Throws Error naming the file and what is wrong.
uint64_t UnpackGzipFolder(const std::string& folder, const std::string& into);

}  // namespace keel

#endif  // KEEL_LAUNCH_GZIP_CHANNEL_H_
