// Keel's one error convention: operations that cannot do what was asked throw
// keel::Error with a message that names the input and the place.
#ifndef KEEL_BASE_ERROR_H_
#define KEEL_BASE_ERROR_H_

#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace keel {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// The text of an errno value ("No such file or directory").
inline std::string ErrnoText(int error) { return std::strerror(error); }

// A message from streamable parts: MakeMessage("file.libsvm:", line, ": bad index").
template <typename... Parts>
std::string MakeMessage(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

// An Error of such a message: throw MakeError("file.libsvm:", line, ": bad index").
template <typename... Parts>
Error MakeError(Parts&&... parts) {
  return Error(MakeMessage(std::forward<Parts>(parts)...));
}

}  // namespace keel

#endif  // KEEL_BASE_ERROR_H_
