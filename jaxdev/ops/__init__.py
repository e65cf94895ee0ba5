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
    pooling3d,
    random,
    reductions,
    reorder,
    rnn,
    scatter,
    sorting,
    views,
)
