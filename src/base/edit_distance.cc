#include "base/edit_distance.h"

#include <algorithm>

namespace keel {

size_t EditDistance(const std::string& a, const std::string& b) {
  // One row of the dynamic programme: row[j] is the distance of a's prefix
  // so far and b's first j characters.
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitution});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string NearestName(const std::string& word, const std::vector<std::string>& candidates) {
  const size_t most = 1 + word.size() / 4;
  std::string nearest;
  size_t nearest_distance = most + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = EditDistance(word, candidate);
    if (distance < nearest_distance || (distance == nearest_distance && candidate < nearest)) {
      nearest = candidate;
      nearest_distance = distance;
    }
  }
  return nearest_distance <= most ? nearest : "";
}

}  // namespace keel
