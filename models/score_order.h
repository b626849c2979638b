// Examples ordered by their score, for the metrics that rank them (ROC AUC,
// the decision threshold's search). Every validation pass ranks each model's
// scores of every validation row (two sorts a model an epoch), so the order is
// made in linear time: a radix sort on the scores' bits. Host only; stateless.
#ifndef KEEL_MODELS_SCORE_ORDER_H_
#define KEEL_MODELS_SCORE_ORDER_H_

#include <vector>

namespace keel {

// A score and whether its example is positive.
struct ScoredExample {
  float score;
  bool positive;
};

// `examples` in ascending order of score (descending with `descending`).
// Examples of equal scores (-0 and +0 among them, as floats compare) end up
// side by side in an unspecified order: the metrics take them as one group.
// The scores must not be NaN (the metrics check that first).
void SortByScore(std::vector<ScoredExample>* examples, bool descending = false);

}  // namespace keel

#endif  // KEEL_MODELS_SCORE_ORDER_H_
