"""Comparisons (eq, ne, lt, le, gt, ge), the extrema maximum/minimum/fmax/fmin and the logical ops."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev.ops.binary.rules import binary
from jaxdev.ops.registry import aten

for _op, _fn in [
    (aten.maximum.default, jnp.maximum),
    (aten.minimum.default, jnp.minimum),
    (aten.fmax.default, jnp.fmax),
    (aten.fmin.default, jnp.fmin),
]:
    binary(_op, _fn)


for _name, _fn in [
    ("eq", jnp.equal),
    ("ne", jnp.not_equal),
    ("lt", jnp.less),
    ("le", jnp.less_equal),
    ("gt", jnp.greater),
    ("ge", jnp.greater_equal),
]:
    binary(getattr(aten, _name).Tensor, _fn, result=torch.bool)
    binary(getattr(aten, _name).Scalar, _fn, result=torch.bool)


for _name, _fn in [("logical_and", jnp.logical_and), ("logical_or", jnp.logical_or), ("logical_xor", jnp.logical_xor)]:
    binary(getattr(aten, _name).default, _fn, result=torch.bool)
