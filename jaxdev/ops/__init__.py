"""Kernels by family; importing this package registers them all.

Families import the registry and the kit (jaxdev/ops/kit), never each other; the dtype carriers
(jaxdev/ops/carriers) join the registry's table first, so every kernel passes through them."""

from jaxdev.ops import carriers  # noqa: F401  (before any kernel registers)

# isort: split

from jaxdev.ops import (  # noqa: F401
    activation,
    advanced_indexing,
    amp,
    attention,
    binary,
    complex,
    conv,
    copy,
    creation,
    distance,
    distributions,
    embedding_bag,
    expanded_put,
    fft,
    fold,
    gamma,
    grid_sample,
    group_norm,
    indexing,
    linalg,
    loss,
    nested,
    normalization,
    padding,
    pointwise,
    pooling,
    put_take,
    random,
    raw_memory,
    reductions,
    reorder,
    rnn,
    scans,
    scatter,
    searching,
    segment_reduce,
    slice_grad,
    softmax,
    sorting,
    sparse,
    sparse_add,
    special,
    ternary,
    transformer,
    upsample,
    views,
    weight_norm,
)

# isort: split
# Composes the families' per-tensor bodies (FAST_BODIES, binary's and ternary's): registered after them.
from jaxdev.ops import (
    foreach,  # noqa: F401
    fused_optimizers,  # noqa: F401
)
