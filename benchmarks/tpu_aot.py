"""A TPU v5e's compiler without the chip, for benchmarks: a program's TPU-optimized HLO and XLA's cost
estimate read on a CPU machine. The compiler itself is jaxdev/audit/deviceless.py's (libtpu from
`bash scripts/get_libtpu.sh`, or $JAXDEV_LIBTPU; its version must match jaxlib's: 0.0.42.1 with 0.10.2).

`compile_for_tpu(fn, *avals)` compiles jax.jit(fn) for the topology's one chip. `as_tpu()` makes
jaxdev's kernels trace as they do on a TPU while it is active (jax.default_backend() says 'tpu': its
facts, its own transcendentals, bfloat16 products kept in bfloat16), with what jaxdev worked out from
the platform forgotten on the way in and out.
"""

from __future__ import annotations

import contextlib

import jax

from jaxdev.audit import deviceless


@contextlib.contextmanager
def as_tpu():
    """jax.default_backend() is 'tpu' inside; JAX's and jaxdev's caches cleared on the way in and out."""
    real = jax.default_backend
    deviceless.forget_platform()
    jax.default_backend = lambda: "tpu"
    try:
        yield
    finally:
        jax.default_backend = real
        deviceless.forget_platform()


def compile_for_tpu(fn, *avals) -> tuple[str, dict]:
    """(TPU-optimized HLO text, XLA's cost analysis) of jax.jit(fn) over `avals` (a pytree each)."""
    compiled = deviceless.compile_for_tpu(fn, *avals)
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return compiled.as_text(), {k: float(v) for k, v in (cost or {}).items() if "{" not in k}
