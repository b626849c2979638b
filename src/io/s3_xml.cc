#include "io/s3_xml.h"

#include <cstdint>
#include <cstdlib>

#include "base/utf8.h"

namespace keel {
namespace {

// XML character data with its entities (&amp; &lt; &gt; &quot; &apos; &#N;
// &#xN;) replaced; an unknown entity is kept as written.
std::string XmlUnescape(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const size_t end = text[i] == '&' ? text.find(';', i) : std::string_view::npos;
    if (end == std::string_view::npos) {
      out += text[i];
      continue;
    }
    const std::string_view entity = text.substr(i + 1, end - i - 1);
    if (entity == "amp") {
      out += '&';
    } else if (entity == "lt") {
      out += '<';
    } else if (entity == "gt") {
      out += '>';
    } else if (entity == "quot") {
      out += '"';
    } else if (entity == "apos") {
      out += '\'';
    } else if (entity.size() > 1 && entity[0] == '#') {
      const bool hex = entity[1] == 'x' || entity[1] == 'X';
      const std::string digits(entity.substr(hex ? 2 : 1));
      char* parsed_end = nullptr;
      const unsigned long code = std::strtoul(digits.c_str(), &parsed_end, hex ? 16 : 10);
      if (digits.empty() || *parsed_end != '\0' || code > 0x10FFFF) {
        out += text.substr(i, end - i + 1);
      } else {
        AppendUtf8(static_cast<uint32_t>(code), &out);
      }
    } else {
      out += text.substr(i, end - i + 1);
    }
    i = end;
  }
  return out;
}

}  // namespace

// The raw contents of each <tag>...</tag> (or <tag attributes>...</tag>, or
// <tag/>) element in `xml`, in order. S3's responses never nest an element
// in one of the same name, and character data cannot hold '<', so a search
// for the tags is exact.
std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> elements;
  const std::string open = "<" + std::string(tag);
  const std::string close = "</" + std::string(tag) + ">";
  size_t at = 0;
  while ((at = xml.find(open, at)) != std::string_view::npos) {
    const size_t after = at + open.size();
    if (after >= xml.size()) break;
    const char next = xml[after];
    if (next != '>' && next != '/' && next != ' ' && next != '\t' && next != '\r' && next != '\n') {
      at = after;  // a longer tag name
      continue;
    }
    const size_t start_end = xml.find('>', after);
    if (start_end == std::string_view::npos) break;
    if (xml[start_end - 1] == '/') {
      elements.emplace_back();
      at = start_end + 1;
      continue;
    }
    const size_t end = xml.find(close, start_end + 1);
    if (end == std::string_view::npos) break;
    elements.push_back(xml.substr(start_end + 1, end - start_end - 1));
    at = end + close.size();
  }
  return elements;
}

// The unescaped text of the first <tag> element, or "" if there is none.
std::string XmlText(std::string_view xml, std::string_view tag) {
  const std::vector<std::string_view> elements = XmlElements(xml, tag);
  return elements.empty() ? std::string() : XmlUnescape(elements.front());
}

}  // namespace keel
