// Writing XML and HTML text: XmlEscape, for S3's requests (io/s3_storage.cc)
// and the job report's HTML and SVG (src/report). Reading S3's XML answers:
// io/s3_xml.h.
#ifndef KEEL_BASE_XML_H_
#define KEEL_BASE_XML_H_

#include <string>
#include <string_view>

namespace keel {

// `text` with & < > " ' as entities, for character data.
std::string XmlEscape(std::string_view text);

}  // namespace keel

#endif  // KEEL_BASE_XML_H_
