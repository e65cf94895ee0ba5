"""Kernels by family; importing this package registers them all."""

from jaxdev.ops import (  # noqa: F401
    conv,
    copy,
    creation,
    indexing,
    linalg,
    loss,
    nn,
    normalization,
    pointwise,
    pooling,
    random,
    reductions,
    rnn,
    views,
)
