// Gradient shaping: SageMaker's (and MXNet's) rescale_grad and clip_gradient,
// applied by the servers to every pushed gradient of a table before its
// optimizer sees it. Applying them on the server rather than where workers
// form gradients keeps one place for every backend (CPU and CUDA) and every
// optimizer, and leaves tables without them (the control table's sums) alone.
#ifndef KEEL_KV_GRADIENT_SHAPING_H_
#define KEEL_KV_GRADIENT_SHAPING_H_

#include <cstddef>
#include <memory>

#include "kv/optimizer_interface.h"

namespace keel {

// True if `options` asks for any shaping: rescale_grad other than 1 or a
// positive clip_gradient.
bool ShapesGradients(const OptimizerOptions& options);

// out[i] = clip(rescale * gradient[i]) for i < count, where clip projects onto
// [-clip_gradient, clip_gradient] when clip_gradient > 0 and is the identity
// when it is 0. `out` may be `gradient`. The weight decay (l2) is added by the
// optimizer afterwards, so it is neither rescaled nor clipped (as in MXNet).
void ShapeGradient(const float* gradient, size_t count, float rescale, float clip_gradient,
                   float* out);

// `inner` with every gradient shaped by options.rescale_grad and
// options.clip_gradient first. Not synchronized, like every Optimizer.
std::unique_ptr<Optimizer> WithGradientShaping(const OptimizerOptions& options,
                                               std::unique_ptr<Optimizer> inner);

}  // namespace keel

#endif  // KEEL_KV_GRADIENT_SHAPING_H_
