// Edit distance between names, for "did you mean" suggestions: a misspelled
// flag, command or option is answered with the nearest name that exists.
#ifndef KEEL_BASE_EDIT_DISTANCE_H_
#define KEEL_BASE_EDIT_DISTANCE_H_

#include <cstddef>
#include <string>
#include <vector>

namespace keel {

// The Levenshtein distance of `a` and `b`: the fewest single-character
// insertions, deletions and substitutions that turn one into the other.
size_t EditDistance(const std::string& a, const std::string& b);

// The name among `candidates` nearest to `word` by EditDistance, if it is
// near enough to be a misspelling of it (at most 1 + |word| / 4 edits), or
// "" if none is. Ties go to the first candidate in alphabetical order.
std::string NearestName(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace keel

#endif  // KEEL_BASE_EDIT_DISTANCE_H_
