"""Activation functions of torch.nn, with the `*_backward` kernels their autograd formulas call:
threshold (relu's backward), gelu, silu, sigmoid/tanh backward, hardtanh, leaky_relu, elu
(celu/selu decompose to it), hardsigmoid, hardswish, softplus, mish, softshrink/hardshrink,
log_sigmoid, logit, glu, prelu (mish_backward is CompositeImplicitAutograd: it decomposes; silu_backward
is too, but has CPU's kernel here: registry.FORMULA_COMPOSITES).

Each formula is PyTorch's CPU kernel's (same comparisons at the boundaries, so gradients at the
kinks agree); float16/bfloat16 compute in float32 through `apply`'s opmath.

By concern: common (shared factories and checks), piecewise (linear pieces), smooth. Importing the
package registers them all.
"""

from jaxdev.ops.activation import piecewise, smooth  # noqa: F401
