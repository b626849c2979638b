// RecordIO: MXNet's (dmlc-core's) record framing, the container of SageMaker's
// recordIO-protobuf format.
//
// Each record is: uint32 magic 0xCED7230A, uint32 lrecord, the payload, zero
// padding to a multiple of 4 bytes; integers are little-endian. lrecord holds
// the payload length in its lower 29 bits and a flag in its upper 3: 0 a whole
// record, 1 the start, 2 a middle, 3 the end of a multi-part record. A writer
// cuts a payload into parts wherever the magic appears at a 4-byte-aligned
// offset of it and drops that magic (a reader puts it back), so in a file the
// magic at a 4-byte-aligned offset always starts a header: that is how a
// reader starting mid-file finds the next record.
#ifndef KEEL_IO_RECORDIO_H_
#define KEEL_IO_RECORDIO_H_

#include <cstdint>
#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "base/error.h"
#include "io/input_split.h"
#include "record.pb.h"

namespace keel {

inline constexpr uint32_t kRecordIOMagic = 0xCED7230A;

// What RecordIOReader throws for bad framing, as opposed to a failed read: the
// reader can go on after it.
class RecordIOFramingError : public Error {
 public:
  using Error::Error;
};

// Writes RecordIO records. Not thread-safe.
class RecordIOWriter {
 public:
  // Writes to `*out`, which must outlive the writer.
  explicit RecordIOWriter(std::ostream* out);
  // Creates or truncates the file `path`. Throws Error if it cannot.
  explicit RecordIOWriter(const std::string& path);

  // Serializes `record` and writes it as one RecordIO record.
  void Write(const aialgs::data::Record& record);
  // Writes `payload` as one RecordIO record, in parts if it holds the magic at
  // a 4-byte-aligned offset. Throws Error if the payload is 2^29 bytes or
  // longer, or if writing fails.
  void WritePayload(std::string_view payload);
  // Flushes the stream. Throws Error if it has failed.
  void Flush();

  uint64_t bytes_written() const { return bytes_written_; }

 private:
  void WritePart(uint32_t flag, const char* data, uint32_t length);

  std::string name_;  // for messages
  std::unique_ptr<std::ofstream> file_;
  std::ostream* out_;
  std::string serialized_;
  uint64_t bytes_written_ = 0;
};

// Reads the payloads of the RecordIO records that start in an InputSplit: a
// split not starting at 0 first skips to the first 4-byte-aligned magic that
// starts a whole record or the start of a multi-part one. Not thread-safe.
class RecordIOReader {
 public:
  // Opens the split's file (blocking for a FIFO until a writer opens it),
  // to read it `block_size` bytes at a time. Throws Error if it cannot.
  explicit RecordIOReader(const InputSplit& split, size_t block_size = size_t{4} << 20);

  // Sets `*payload` to the next record's payload (the parts of a multi-part
  // record joined) and returns true; returns false at the end of the split.
  // The payload is valid until the next call. Throws RecordIOFramingError
  // ("PATH@OFFSET: ...") for bad framing: a wrong magic or flag, a truncated
  // record, a part out of order; the reader has then moved past the bad bytes,
  // so calling again continues with the next good record. Throws Error if a
  // read fails.
  bool ReadRecord(std::string_view* payload);

  // The offset of the record last returned or rejected.
  uint64_t record_offset() const { return record_offset_; }
  // Bytes consumed from the first record of the split on.
  uint64_t bytes_read() const { return bytes_read_ + pending_consume_; }
  const std::string& path() const { return split_.path; }

 private:
  void Consume(size_t count);
  // Skips to the next 4-byte-aligned header with flag 0 or 1 at an offset
  // before the split's end; false if there is none.
  bool SkipToRecordStart();
  // Searches for a record's start if it must (at the split's start or after
  // bad framing); false, and finished, if there is none.
  bool ReachRecordStart();
  // For a header cut short by the input's end: consumes the rest, finishes.
  [[noreturn]] void ThrowTruncatedHeader(uint64_t offset);
  // The buffered header's lrecord after checking that it starts a whole or a
  // multi-part record; throws RecordIOFramingError past its magic if not.
  uint32_t CheckStartHeader(uint64_t offset);
  // Buffers the part whose header is at `offset`; returns its size in the
  // input (header, payload, padding if present). Throws RecordIOFramingError,
  // finished, if the input ends inside its payload.
  size_t FillPart(uint64_t offset, uint32_t length);
  // Reads the parts after a start part into joined_.
  void ReadRemainingParts(uint64_t record_offset);

  InputSplit split_;
  BlockReader source_;
  uint64_t end_;                // records starting at or past this belong to the next split
  bool must_search_;            // at the split's start or after bad framing
  bool counting_ = false;       // bytes_read_ counts from the first record found
  bool finished_ = false;       // after a truncated record
  size_t pending_consume_ = 0;  // the bytes of the payload last returned
  uint64_t record_offset_ = 0;
  uint64_t bytes_read_ = 0;
  std::string joined_;
};

}  // namespace keel

#endif  // KEEL_IO_RECORDIO_H_
