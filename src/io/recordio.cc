#include "io/recordio.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "base/error.h"

namespace keel {
namespace {

constexpr uint32_t kLengthMask = (uint32_t{1} << 29) - 1;
constexpr size_t kHeaderSize = 8;

uint32_t LoadLittleEndian32(const char* bytes) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes);
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
}

void StoreLittleEndian32(uint32_t value, char* bytes) {
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
}

uint32_t FlagOf(uint32_t lrecord) { return lrecord >> 29; }
uint32_t LengthOf(uint32_t lrecord) { return lrecord & kLengthMask; }
uint64_t Padded(uint64_t length) { return (length + 3) & ~uint64_t{3}; }

template <typename... Parts>
RecordIOFramingError FramingError(Parts&&... parts) {
  return RecordIOFramingError(MakeMessage(std::forward<Parts>(parts)...));
}

std::string Hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

}  // namespace

RecordIOWriter::RecordIOWriter(std::ostream* out) : name_("RecordIO stream"), out_(out) {}

RecordIOWriter::RecordIOWriter(const std::string& path)
    : name_(path),
      file_(std::make_unique<std::ofstream>(path, std::ios::binary | std::ios::trunc)),
      out_(file_.get()) {
  if (!*file_) throw MakeError(path, ": cannot create");
}

void RecordIOWriter::Write(const aialgs::data::Record& record) {
  // Deterministic: a Record's maps otherwise come out in varying order, and
  // the same record would not always make the same bytes.
  serialized_.clear();
  {
    google::protobuf::io::StringOutputStream stream(&serialized_);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!record.SerializeToCodedStream(&coded) || coded.HadError()) {
      throw MakeError(name_, ": cannot serialize a record");
    }
  }
  WritePayload(serialized_);
}

void RecordIOWriter::WritePayload(std::string_view payload) {
  if (payload.size() > kLengthMask) {
    throw MakeError(name_, ": a RecordIO payload must be shorter than 2^29 bytes, this one has ",
                    payload.size());
  }
  const char* data = payload.data();
  const auto length = static_cast<uint32_t>(payload.size());
  const uint32_t aligned_end = length & ~uint32_t{3};
  uint32_t part_begin = 0;
  for (uint32_t at = 0; at < aligned_end; at += 4) {
    if (LoadLittleEndian32(data + at) != kRecordIOMagic) continue;
    WritePart(part_begin == 0 ? 1 : 2, data + part_begin, at - part_begin);
    part_begin = at + 4;
  }
  WritePart(part_begin == 0 ? 0 : 3, data + part_begin, length - part_begin);
}

void RecordIOWriter::WritePart(uint32_t flag, const char* data, uint32_t length) {
  char header[kHeaderSize];
  StoreLittleEndian32(kRecordIOMagic, header);
  StoreLittleEndian32(flag << 29 | length, header + 4);
  static const char kZeros[4] = {0, 0, 0, 0};
  const uint64_t padding = Padded(length) - length;
  out_->write(header, kHeaderSize);
  out_->write(data, length);
  out_->write(kZeros, static_cast<std::streamsize>(padding));
  if (!*out_) throw MakeError(name_, ": write failed");
  bytes_written_ += kHeaderSize + length + padding;
}

void RecordIOWriter::Flush() {
  out_->flush();
  if (!*out_) throw MakeError(name_, ": write failed");
}

RecordIOReader::RecordIOReader(const InputSplit& split, size_t block_size)
    : split_(split),
      source_(split.path, split.is_pipe, split.is_pipe ? 0 : split.begin, block_size),
      end_(split.is_pipe ? UINT64_MAX : split.end),
      must_search_(!split.is_pipe && split.begin > 0),
      counting_(!must_search_) {}

void RecordIOReader::Consume(size_t count) {
  source_.Consume(count);
  if (counting_) bytes_read_ += count;
}

bool RecordIOReader::SkipToRecordStart() {
  const size_t misalignment = (4 - source_.position() % 4) % 4;
  if (misalignment > 0) {
    if (!source_.Fill(misalignment)) return false;
    Consume(misalignment);
  }
  while (source_.position() < end_) {
    if (!source_.Fill(kHeaderSize)) return false;
    const char* data = source_.data();
    const size_t size = source_.size();
    size_t at = 0;
    for (; at + kHeaderSize <= size && source_.position() + at < end_; at += 4) {
      if (LoadLittleEndian32(data + at) == kRecordIOMagic &&
          FlagOf(LoadLittleEndian32(data + at + 4)) <= 1) {
        Consume(at);
        return true;
      }
    }
    Consume(at);
  }
  return false;
}

bool RecordIOReader::ReadRecord(std::string_view* payload) {
  Consume(pending_consume_);
  pending_consume_ = 0;
  if (finished_ || !ReachRecordStart()) return false;
  const uint64_t offset = source_.position();
  if (offset >= end_) return false;
  record_offset_ = offset;
  if (!source_.Fill(kHeaderSize)) {
    if (source_.size() == 0) return false;
    ThrowTruncatedHeader(offset);
  }
  const uint32_t lrecord = CheckStartHeader(offset);
  const uint32_t length = LengthOf(lrecord);
  const size_t record_size = FillPart(offset, length);
  if (FlagOf(lrecord) == 0) {
    *payload = std::string_view(source_.data() + kHeaderSize, length);
    pending_consume_ = record_size;
    return true;
  }
  joined_.assign(source_.data() + kHeaderSize, length);
  Consume(record_size);
  ReadRemainingParts(offset);
  *payload = joined_;
  return true;
}

bool RecordIOReader::ReachRecordStart() {
  if (!must_search_) return true;
  if (!SkipToRecordStart()) {
    finished_ = true;
    return false;
  }
  must_search_ = false;
  counting_ = true;
  return true;
}

void RecordIOReader::ThrowTruncatedHeader(uint64_t offset) {
  const size_t left = source_.size();
  Consume(left);
  finished_ = true;
  throw FramingError(split_.path, "@", offset, ": truncated record: the input ends ", left,
                     " bytes into its 8-byte header");
}

uint32_t RecordIOReader::CheckStartHeader(uint64_t offset) {
  const std::string& path = split_.path;
  const uint32_t magic = LoadLittleEndian32(source_.data());
  if (magic != kRecordIOMagic) {
    Consume(4);
    must_search_ = true;
    throw FramingError(path, "@", offset, ": expected the RecordIO magic ", Hex(kRecordIOMagic),
                       ", found ", Hex(magic));
  }
  const uint32_t lrecord = LoadLittleEndian32(source_.data() + 4);
  const uint32_t flag = FlagOf(lrecord);
  if (flag > 1) {
    Consume(4);
    must_search_ = true;
    if (flag > 3) throw FramingError(path, "@", offset, ": bad RecordIO flag ", flag, " (0 to 3)");
    throw FramingError(path, "@", offset, ": ", flag == 2 ? "a middle" : "an end",
                       " part of a multi-part record without its start part");
  }
  return lrecord;
}

size_t RecordIOReader::FillPart(uint64_t offset, uint32_t length) {
  const uint64_t whole = kHeaderSize + Padded(length);
  const bool fits_in_file = offset + kHeaderSize + length <= source_.file_size();
  if (!fits_in_file || (!source_.Fill(whole) && source_.size() < kHeaderSize + length)) {
    const uint64_t left =
        fits_in_file ? source_.size() : source_.file_size() - std::min(offset, source_.file_size());
    Consume(source_.size());
    finished_ = true;
    throw FramingError(split_.path, "@", offset, ": truncated record: its header says ", length,
                       " payload bytes, the input ends ",
                       left - std::min<uint64_t>(left, kHeaderSize), " bytes into it");
  }
  // The padding of the last record may be missing at the end of the input.
  return std::min<uint64_t>(whole, source_.size());
}

void RecordIOReader::ReadRemainingParts(uint64_t record_offset) {
  const std::string& path = split_.path;
  char magic_bytes[4];
  StoreLittleEndian32(kRecordIOMagic, magic_bytes);
  for (;;) {
    const uint64_t offset = source_.position();
    if (!source_.Fill(kHeaderSize)) {
      Consume(source_.size());
      finished_ = true;
      throw FramingError(path, "@", record_offset,
                         ": truncated record: the input ends before the end part of this "
                         "multi-part record");
    }
    const uint32_t magic = LoadLittleEndian32(source_.data());
    const uint32_t lrecord = LoadLittleEndian32(source_.data() + 4);
    const uint32_t flag = FlagOf(lrecord);
    const uint32_t length = LengthOf(lrecord);
    if (magic != kRecordIOMagic || flag < 2 || flag > 3) {
      // Leave the header: if it starts a record, the search finds it.
      must_search_ = true;
      if (magic != kRecordIOMagic) {
        throw FramingError(path, "@", record_offset,
                           ": multi-part record: expected the RecordIO magic ", Hex(kRecordIOMagic),
                           " at byte ", offset, ", found ", Hex(magic));
      }
      throw FramingError(path, "@", record_offset, ": multi-part record has no end part (flag ",
                         flag, " at byte ", offset, ")");
    }
    const uint64_t whole = kHeaderSize + Padded(length);
    const bool fits_in_file = offset + kHeaderSize + length <= source_.file_size();
    if (!fits_in_file || (!source_.Fill(whole) && source_.size() < kHeaderSize + length)) {
      Consume(source_.size());
      finished_ = true;
      throw FramingError(path, "@", record_offset, ": truncated record: its part at byte ", offset,
                         " says ", length, " payload bytes, the input ends first");
    }
    joined_.append(magic_bytes, 4);
    joined_.append(source_.data() + kHeaderSize, length);
    Consume(std::min<uint64_t>(whole, source_.size()));
    if (flag == 3) return;
  }
}

}  // namespace keel
