"""Kernels by family; importing this package registers them all."""

from jaxdev.ops import (  # noqa: F401
    activation,
    conv,
    copy,
    creation,
    indexing,
    linalg,
    loss,
    nn,
    normalization,
    padding,
    pointwise,
    pooling,
    random,
    reductions,
    reorder,
    rnn,
    sorting,
    views,
)
