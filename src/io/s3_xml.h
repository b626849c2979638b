// The little XML that S3's REST API speaks: reading elements out of its
// answers. Not a general XML parser: it relies on S3's answers never nesting
// an element in one of the same name. Text for its requests is escaped with
// XmlEscape (base/xml.h).
#ifndef KEEL_IO_S3_XML_H_
#define KEEL_IO_S3_XML_H_

#include <string>
#include <string_view>
#include <vector>

namespace keel {

// The raw contents of each <tag>...</tag> (or <tag attributes>...</tag>, or
// <tag/>) element in `xml`, in order; they point into `xml`.
std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag);

// The text of the first <tag> element with its entities replaced (&amp; &lt;
// &gt; &quot; &apos; &#N; &#xN;; an unknown entity is kept as written), or ""
// if there is none.
std::string XmlText(std::string_view xml, std::string_view tag);

}  // namespace keel

#endif  // KEEL_IO_S3_XML_H_
