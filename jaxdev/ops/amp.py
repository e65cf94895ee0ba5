"""The two kernels behind `torch.amp.GradScaler`: unscale the gradients and note non-finite values,
then grow or back off the scale. Every mixed-precision training step calls them; written without a
Python branch on a value, so a compiled optimizer step holds them too."""

from __future__ import annotations

import jax.numpy as jnp

from jaxdev import tensor
from jaxdev.ops.kit import J, opmath
from jaxdev.ops.registry import aten, register


@register(aten._amp_foreach_non_finite_check_and_unscale_.default)
def non_finite_check_and_unscale_(grads, found_inf, inv_scale):
    inv = J(inv_scale)
    bad = J(found_inf)
    for g in grads:
        x = J(g)
        bad = jnp.where(jnp.any(~jnp.isfinite(x)), jnp.ones_like(bad), bad)
        tensor.write(g, (x.astype(opmath(x.dtype)) * inv).astype(x.dtype))
    tensor.write(found_inf, bad)


@register(aten._amp_update_scale_.default)
def update_scale_(self, growth_tracker, found_inf, scale_growth_factor, scale_backoff_factor, growth_interval):
    scale, tracker, inf = J(self), J(growth_tracker), J(found_inf)
    grown = tracker + 1
    grow = grown == growth_interval
    # CPU's kernel: float scale times a double factor, in double, rounded to float; a grown scale that
    # is not finite is not taken (the scale never grows into inf), the tracker resets either way
    wide = scale.astype(jnp.float64)
    backed_off = (wide * scale_backoff_factor).astype(scale.dtype)
    grown_scale = (wide * scale_growth_factor).astype(scale.dtype)
    grow_to = jnp.where(jnp.isfinite(grown_scale), grown_scale, scale)
    new_scale = jnp.where(inf > 0, backed_off, jnp.where(grow, grow_to, scale))
    new_tracker = jnp.where((inf > 0) | grow, jnp.zeros_like(tracker), grown)
    tensor.write(self, new_scale.astype(scale.dtype))
    tensor.write(growth_tracker, new_tracker.astype(tracker.dtype))
    return self
