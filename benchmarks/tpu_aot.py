"""A TPU v5e's compiler without the chip: JAX's deviceless ahead-of-time compilation (a TPU topology
from libtpu, no device attached), so a program's TPU-optimized HLO and XLA's cost estimate can be
read on a CPU machine. libtpu must be importable (PIP_CONFIG_FILE=/dev/null pip install --no-deps
--target /tmp/tpusite /opt/pypi/files/libtpu-*.whl, then PYTHONPATH=/tmp/tpusite); jaxlib's own
version must match it (0.10.2 with libtpu 0.0.42.1 here).

`device()` is the topology's one chip; `on_tpu(avals)` gives ShapeDtypeStructs placed on it, and
`jax.jit(f).lower(*avals).compile()` then runs the TPU compiler. `as_tpu()` makes jaxdev's kernels
trace as they do on a TPU (jax.default_backend() says 'tpu' while it is active: its facts, its own
transcendentals, bfloat16 products kept in bfloat16) after clearing JAX's tracing caches.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys

os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-1")
os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

import jax
from jax.sharding import SingleDeviceSharding


@functools.cache
def device():
    from jax.experimental import topologies

    topo = topologies.get_topology_desc(
        platform="tpu", topology_name="v5e:1x1", chips_per_host_bounds=(1, 1, 1), num_slices=1
    )
    return topo.devices[0]


def on_tpu(tree):
    """The arrays' (or avals') shapes and dtypes as ShapeDtypeStructs on the topology's chip."""
    sharding = SingleDeviceSharding(device())
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), tree)


@contextlib.contextmanager
def as_tpu():
    """jax.default_backend() is 'tpu' inside; JAX's and jaxdev's jit caches cleared on the way in and out."""
    real = jax.default_backend
    _forget_jaxdev_jits()
    jax.default_backend = lambda: "tpu"
    try:
        yield
    finally:
        jax.default_backend = real
        _forget_jaxdev_jits()


def _forget_jaxdev_jits() -> None:
    """JAX's caches and the functools caches of jaxdev's modules (kit/jit.py's `jitted` factories,
    capabilities.platform): a kernel jitted before keeps the trace it made on this CPU through
    jax.clear_caches when it is called inside another program's trace; new jit objects do not."""
    jax.clear_caches()
    for name, module in list(sys.modules.items()):
        if name.startswith("jaxdev") and module is not None:
            for value in list(vars(module).values()):
                if isinstance(value, functools._lru_cache_wrapper):
                    value.cache_clear()


def compile_for_tpu(fn, *avals) -> tuple[str, dict]:
    """(TPU-optimized HLO text, XLA's cost analysis) of jax.jit(fn) over `avals`."""
    compiled = jax.jit(fn).lower(*on_tpu(avals)).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return compiled.as_text(), {k: float(v) for k, v in (cost or {}).items() if "{" not in k}
