"""Kernels by family; importing this package registers them all."""

from jaxdev.ops import copy, creation, pointwise, views  # noqa: F401
