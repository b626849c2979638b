#include "worker/artifact_index.h"

#include <limits>

namespace keel {

ArtifactIndex::ArtifactIndex(const std::vector<uint64_t>& features) : features_(features) {
  int bits = 4;
  while ((size_t{1} << bits) < 2 * features.size() && bits < 62) ++bits;
  shift_ = 64 - bits;
  mask_ = (size_t{1} << bits) - 1;
  if (features.size() < std::numeric_limits<uint32_t>::max()) {
    Fill(&narrow_);
  } else {
    Fill(&wide_);
  }
}

template <typename Row>
void ArtifactIndex::Fill(std::vector<Row>* slots) {
  slots->assign(mask_ + 1, 0);
  for (size_t i = 0; i < features_.size(); ++i) {
    size_t slot = MixKey(features_[i]) >> shift_;
    while ((*slots)[slot] != 0 && features_[(*slots)[slot] - 1] != features_[i]) {
      slot = (slot + 1) & mask_;
    }
    (*slots)[slot] = static_cast<Row>(i + 1);
  }
}

}  // namespace keel
