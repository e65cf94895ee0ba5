"""Kernels by family; importing this package registers them all."""

from jaxdev.ops import (  # noqa: F401
    copy,
    creation,
    indexing,
    linalg,
    nn,
    pointwise,
    random,
    reductions,
    views,
)
