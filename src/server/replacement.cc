#include "server/replacement.h"

namespace keel {

bool Replacement::replaces() const { return node_.registration().replaces(); }

std::string Replacement::restore_checkpoint(std::string* uri) const {
  const proto::Meta answer = node_.registration();
  *uri = answer.checkpoint_uri();
  return answer.checkpoint();
}

}  // namespace keel
