// Fuzzes the reading of S3's XML answers (io/s3_xml.h) the way the S3 backend
// reads them: a listing's <Contents> with their <Key> and <Size>, an error's
// <Code> and <Message>. Also checks that XmlText reads back what XmlEscape
// wrote, for the input as text.
#include <cstdint>
#include <string>
#include <string_view>

#include "base/xml.h"
#include "fuzz_util.h"
#include "io/s3_xml.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  keel::fuzz::QuietLogging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  for (const std::string_view contents : keel::XmlElements(xml, "Contents")) {
    (void)keel::XmlText(contents, "Key");
    (void)keel::XmlText(contents, "Size");
  }
  for (const char* tag : {"IsTruncated", "NextContinuationToken", "Code", "Message", "UploadId"}) {
    (void)keel::XmlText(xml, tag);
  }
  (void)keel::XmlElements(xml, "Error");
  const std::string element = "<Key>" + keel::XmlEscape(xml) + "</Key>";
  if (keel::XmlText(element, "Key") != xml) __builtin_trap();
  return 0;
}
