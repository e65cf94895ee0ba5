"""The float64 arbitration for tests: `three_way(fn, inputs, dtype)` runs fn at `dtype` on jax and on CPU
and at float64 (complex128) on CPU, and asserts the auditor's rule: jax within tolerance of the wide run,
or no farther from it than CPU. Used by the op tests of several families (tests/ops/test_*.py)."""

from __future__ import annotations

import torch
from jaxdev_testing import JAX
from torch.testing._comparison import default_tolerances

from jaxdev.audit.check import tolerance_units


def _wide(dtype):
    return torch.complex128 if dtype.is_complex else torch.float64


def _leaves(out):
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for o in out for t in _leaves(o)]


def _run(fn, inputs, device, dtype, seeds):
    """fn's outputs (seeds None) or the gradients of fn's outputs against `seeds` for the floating inputs."""
    args = [
        x.detach().to(device=device, dtype=dtype).requires_grad_(seeds is not None)
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())
        else (x.to(device) if isinstance(x, torch.Tensor) else x)
        for x in inputs
    ]
    outs = _leaves(fn(*args))
    if seeds is None:
        return [o.detach().cpu() for o in outs]
    grads = torch.autograd.grad(
        outs,
        [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad],
        [s.to(device=device, dtype=o.dtype) for s, o in zip(seeds, outs)],
    )
    return [g.cpu() for g in grads]


def three_way(fn, inputs, dtype, *, backward=False, atol=None, rtol=None):
    """(jax's, CPU's) worst error against the float64 run in tolerance units, asserting the
    arbitration rule: jax within tolerance of it or no farther than CPU."""
    seeds = None
    if backward:
        probe = _leaves(
            fn(*[x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs])
        )
        gen = torch.Generator().manual_seed(0)
        seeds = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in probe]
    cpu = _run(fn, inputs, "cpu", dtype, seeds)
    dev = _run(fn, inputs, JAX, dtype, seeds)
    wide = _run(fn, inputs, "cpu", _wide(dtype), [s.to(_wide(s.dtype)) for s in seeds] if seeds else None)
    jax_err = cpu_err = 0.0
    for j, c, w in zip(dev, cpu, wide):
        d_rtol, d_atol = default_tolerances(c)
        a, r = atol if atol is not None else d_atol, rtol if rtol is not None else d_rtol
        jax_err = max(jax_err, tolerance_units(j, w, a, r))
        cpu_err = max(cpu_err, tolerance_units(c, w, a, r))
    assert jax_err <= 1.0 or jax_err <= cpu_err, f"jax {jax_err:.3g}x tolerance from float64, CPU {cpu_err:.3g}x"
    return jax_err, cpu_err
