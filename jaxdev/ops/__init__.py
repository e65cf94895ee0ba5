"""Kernels by family; importing this package registers them all."""

from jaxdev.ops import copy, creation, views  # noqa: F401
