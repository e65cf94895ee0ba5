"""jaxdev's graph programs kept on disk as serialized JAX exports: a second process running the same
graph on inputs of the same layout skips tracing it through jaxdev's kernels and lowering it.

A graph's program is a function of the graph, its inputs' layout and jaxdev's kernels, so it is
traced once per (graph, layout) and stored with `jax.export` (StableHLO, serialized), together with
what the trace learned about the graph's outputs (which are new storages, which alias inputs, which
inputs it writes, the random numbers it draws). A later process unpickles it and calls it in
`jax.jit`; XLA's executable then comes from JAX's persistent compilation cache as before. The
export is what runs in the process that made it too, so a process that traced the program and one
that loaded it run the same StableHLO, and compute the same bits.

Key: jaxdev's fingerprint (its source, torch, jax, jaxlib, Python: cache.fingerprint), the
graph's ops and dataflow, its output devices, the inputs' layout key (sizes, strides, offsets, dtypes, aliasing,
Python scalars), the storage shapes, the platform and device kind, and the JAX and torch settings a
kernel reads while tracing. Not cached (traced as before, in memory only): graphs with constants
(get_attr nodes), graphs that return tensors made on the CPU, programs under a mesh or over sharded
storages, and whatever jax.export refuses (a host callback, a custom call without a stability
guarantee). A damaged or unreadable entry is ignored and traced again.

Entries live in `<JAXDEV_CACHE_DIR>/programs/<fingerprint>/`; off with JAXDEV_COMPILE_CACHE=off.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import tempfile

import jax
import torch

from jaxdev import tensor
from jaxdev.ops.kit import math_mode
from jaxdev.parallel import mesh
from jaxdev.programs import cache
from jaxdev.tracing import UntraceableGraph

SUBDIR = "programs"
_FIELDS = ("outputs", "new_storages", "mutated", "bumped", "wrapped", "draws")


class STATS:
    """This process's program cache traffic."""

    hits = 0  # programs loaded from disk instead of traced
    saves = 0  # programs traced here and written


def directory() -> str | None:
    root = cache.directory()
    if root is None or not cache.compile_caches_on():
        return None
    return os.path.join(root, SUBDIR, cache.fingerprint())


def key(spec, inputs) -> str | None:
    """The entry's name for this specialisation, or None where it is not cached."""
    gm = spec.program.gm
    if mesh.get_mesh() is not None or tensor.SHARDED_ENTRIES or inputs.cpu:
        return None
    if any(n.op == "get_attr" for n in gm.graph.nodes):
        return None
    device = jax.devices()[0]
    parts = (
        cache.fingerprint(),
        spec.program.name,
        _graph_key(gm),
        tuple(spec.program.output_devices),
        inputs.key,
        tuple(spec.array_shapes),
        device.platform,
        getattr(device, "device_kind", ""),
        jax.config.jax_enable_x64,
        jax.config.jax_default_matmul_precision,
        math_mode.mode(),  # which exp, log, division ... kernels trace (ops/kit/math_mode.py; unset: the platform's)
        torch.are_deterministic_algorithms_enabled(),
        torch.get_default_dtype(),
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _graph_key(gm) -> str:
    """The graph's ops, dataflow and planned layouts, by node position: an unpickled graph
    (AOTAutograd's cache) has other node names than the one traced, and the same program."""
    index: dict = {}
    nodes = []
    for i, node in enumerate(gm.graph.nodes):
        index[node] = i
        target = node.target
        if node.op == "placeholder":
            target = None
        elif not isinstance(target, str):
            target = (
                str(target) if isinstance(target, torch._ops.OpOverload) else torch.fx.node._get_qualified_name(target)
            )
        args = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: ("node", index[n]))
        nodes.append((node.op, target, args, _layout(node.meta.get("val"))))
    return repr(nodes)


def _layout(val):
    """A node's planned dtype, sizes and strides (the trace lays new results out so: planned.py)."""
    if isinstance(val, (tuple, list)):
        return tuple(_layout(v) for v in val)
    if isinstance(val, torch.Tensor):
        return (str(val.dtype), tuple(map(str, val.shape)), tuple(map(str, val.stride())))
    return None


def install(spec, inputs, arrays, base) -> bool:
    """Give `spec` its program from the cache, or trace it, export it and store it: either way
    `spec.jitted` then runs the exported program. False (spec untouched) where it is not cached."""
    folder = directory()
    name = key(spec, inputs) if folder else None
    if name is None:
        return False
    path = os.path.join(folder, name)
    loaded = _load(path)
    if loaded is not None:
        exported, fields = loaded
        for field, value in fields.items():
            setattr(spec, field, value)
        spec.jitted = _Runner(exported, arrays, base)
        STATS.hits += 1
        return True
    try:
        exported = jax.export.export(spec.jitted)(arrays, base)  # traces the graph
        blob = _dumps(exported)
    except UntraceableGraph:
        raise  # the graph runs op by op, as without the cache
    except Exception:
        return False  # jax.export refuses the program (a host callback, an unstable custom call): uncached
    if any(o[0] == "constant" for o in spec.outputs):
        return False
    spec.jitted = _Runner(exported, arrays, base)
    _save(path, blob, {f: getattr(spec, f) for f in _FIELDS})
    return True


class _Runner:
    """An exported program, compiled once for the first call's arguments and called as compiled.

    Not `jax.jit(exported.call)` alone: jit keys its cache by whether each array is committed to
    its device, which the first call's arrays (made eagerly) are not and later ones (outputs of
    programs) are, so the second step lowered the export again (a second deserialization and
    lowering of the whole module: 0.4 s for the LM's forward). A compiled executable takes both.
    Arguments it refuses (another layout cannot reach it: the layout key fixed them) go through jit."""

    __slots__ = ("compiled", "jitted")

    def __init__(self, exported, arrays, base):
        self.jitted = jax.jit(exported.call)
        self.compiled = self.jitted.lower(arrays, base).compile()

    def __call__(self, arrays, base):
        try:
            return self.compiled(arrays, base)
        except (TypeError, ValueError):  # raised on the arguments, before anything runs
            return self.jitted(arrays, base)


def _dumps(exported) -> bytes:
    """The export pickled. Not `Exported.serialize()`, which needs the flatbuffers package (not a
    dependency of jax's); a pickle holds JAX's own classes, readable by the same jax, which the
    fingerprint in the entry's folder fixes. Its VJP rule (a closure) is not kept: these programs
    are never differentiated by JAX."""
    return pickle.dumps(dataclasses.replace(exported, _get_vjp=None))


def _load(path: str):
    try:
        with open(path, "rb") as f:
            blob, fields = pickle.load(f)
        return pickle.loads(blob), fields
    except FileNotFoundError:
        return None
    except Exception:  # a damaged entry, or one another jax wrote: traced again and rewritten
        return None


def _save(path: str, blob, fields: dict) -> None:
    try:
        data = pickle.dumps((blob, fields))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # whole or absent: a reader never sees half an entry
        STATS.saves += 1
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass  # not cached; the program runs all the same
