"""One logical `jax:0` over a mesh of JAX devices: sharded tensors, data and parameter parallelism.

PyTorch's pure-Python PrivateUse1 route knows one device index: its Python device guard reports a
count of 1, so `jax:1`, `jax:2`, ... cannot exist as PyTorch devices. jaxdev answers as torch_xla's
SPMD mode does: every tensor stays on the one PyTorch device `jax:0`, and its *values* are laid out
over many JAX devices. To PyTorch nothing changes (shapes, strides, views, autograd, printing);
underneath, each storage's `jax.Array` carries a `jax.sharding.NamedSharding` and the kernels, being
jitted JAX functions, run as sharded XLA programs (GSPMD propagates the shardings: a matmul of a
batch sharded on "data" with replicated weights gives a batch sharded on "data"; the gradients of
replicated weights are all-reduced by XLA).

    mesh = jaxdev.set_mesh({"data": 8})               # or a jax.sharding.Mesh
    x = jaxdev.shard(torch.randn(64, 10).to("jax"), P("data"))
    jaxdev.distribute(model)                          # parameters replicated (data parallel)
    jaxdev.distribute(model, {"*.weight": P(None, "data")})   # or sharded per name ("fsdp"-style)

What stays exact:
* `shard` places a whole storage (the box of jaxdev/tensor.py): every view of it reads the sharded
  array, and writes into it (in-place ops, `copy_`, views' writes, the CPU fallback's write-back, a
  compiled program's mutations, `load_state_dict`) are put back in the same sharding
  (`tensor.keep_sharding`), so a sharded parameter stays sharded through optimizer steps.
* Reading to the host (`.cpu()`, printing, `.item()`, `torch.save`) gathers the full values.
* New tensors made from host values while a mesh is set are replicated over it, so they mix with
  sharded ones in one XLA program. Results of kernels are laid out as XLA's propagation decides.
"""

from __future__ import annotations

import contextlib
import fnmatch
import re
from collections.abc import Iterable, Mapping

import jax
import numpy as np
import torch
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxdev import dtypes, tensor, tracing
from jaxdev.core import placement

__all__ = [
    "PartitionSpec",
    "distribute",
    "from_process_local",
    "get_mesh",
    "is_sharded",
    "mesh",
    "set_mesh",
    "shard",
    "sharding",
    "unshard",
]

_MESH: Mesh | None = None


def _as_mesh(m, axis_names=None) -> Mesh | None:
    if m is None or isinstance(m, Mesh):
        return m
    if isinstance(m, Mapping):  # {"data": 4, "model": 2}
        axis_names, m = tuple(m), tuple(m.values())
    if isinstance(m, int):
        m = (m,)
    shape = tuple(int(n) for n in m)
    if axis_names is None:
        raise TypeError("set_mesh: give axis names, as set_mesh({'data': 8}) or set_mesh((8,), ('data',))")
    axis_names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    if len(axis_names) != len(shape):
        raise ValueError(f"set_mesh: {len(shape)} axis sizes but {len(axis_names)} axis names")
    n = int(np.prod(shape))
    devices = jax.devices()
    if n > len(devices):
        raise ValueError(f"set_mesh: a mesh of {n} devices needs {n} JAX devices; JAX has {len(devices)}")
    return Mesh(np.array(devices[:n]).reshape(shape), axis_names)


def set_mesh(m, axis_names=None) -> Mesh | None:
    """Make `m` the mesh `jax:0` spans; returns it. `m` is a `jax.sharding.Mesh`, a mapping of axis
    names to sizes (`{"data": 8}`), or sizes with `axis_names`; None goes back to one device.

    While a mesh is set, tensors made from host values are replicated over it. Tensors already on the
    device keep their placement until `shard`/`distribute` places them."""
    global _MESH
    _MESH = _as_mesh(m, axis_names)
    placement.set_host_placement(None if _MESH is None else NamedSharding(_MESH, PartitionSpec()))
    return _MESH


def get_mesh() -> Mesh | None:
    """The mesh set by `set_mesh` / `mesh`, or None (one device)."""
    return _MESH


@contextlib.contextmanager
def mesh(m, axis_names=None):
    """`with jaxdev.mesh({"data": 8}) as m:` — `set_mesh` for the block, the previous mesh after it."""
    before = _MESH
    try:
        yield set_mesh(m, axis_names)
    finally:
        set_mesh(before)


def _spec(spec) -> PartitionSpec:
    if spec is None:
        return PartitionSpec()
    if isinstance(spec, PartitionSpec):
        return spec
    if isinstance(spec, str):
        return PartitionSpec(spec)
    return PartitionSpec(*spec)


def _sharding_for(spec, m) -> jax.sharding.Sharding:
    if isinstance(spec, jax.sharding.Sharding):
        return spec
    m = _as_mesh(m) if m is not None else _MESH
    if m is None:
        raise RuntimeError("jaxdev.shard: no mesh is set; call jaxdev.set_mesh(...) or pass mesh=")
    return NamedSharding(m, _spec(spec))


def shard(t: torch.Tensor, spec=None, *, mesh=None) -> torch.Tensor:
    """Lay out jax tensor `t`'s values over the mesh by `spec` (a `PartitionSpec`, a tuple of axis
    names/None per dim, or a `jax.sharding.Sharding`; None replicates) and return `t` itself.

    The values move device to device (no host round trip). `t` must span its storage contiguously
    (a fresh tensor, a parameter): the storage is what is placed, and every view of it then reads
    the sharded array. Later writes into the storage keep the placement. Not an autograd op: the
    values do not change, so neither does any graph built on them."""
    if not tensor.is_jax(t):
        raise TypeError(f"jaxdev.shard expects a tensor on the jax device, got one on {t.device}")
    box = tensor.box_of(t)
    if not (t.dtype is box.dtype and t.storage_offset() == 0 and t.is_contiguous() and t.numel() == box.numel):
        raise ValueError(
            "jaxdev.shard places a whole storage: this tensor is a view that does not span its storage "
            "contiguously (shard its base, or a .clone())"
        )
    if tracing.is_traced(box.array):
        raise RuntimeError("jaxdev.shard cannot place a tensor while a compiled program is traced")
    target = _sharding_for(spec, mesh)
    shape = tuple(t.shape)
    a = box.array
    if a.shape != shape:
        a = a.reshape(shape)
    box.array = tensor.alias(a, jax.device_put(a, target))
    tensor.SHARDED[box] = (shape, target)
    return t


def from_process_local(local: torch.Tensor, spec, *, mesh=None) -> torch.Tensor:
    """Multi-host (after `jax.distributed.initialize`): a jax tensor holding the global array whose
    part on this process's devices is `local` (a CPU or jax tensor; each process passes its own
    part, e.g. its slice of the batch). With `P("data")` over a mesh of all processes' devices, the
    global batch is the processes' parts concatenated in process order. On one process this is
    `shard(local.to("jax"), spec)` with a copy."""
    target = _sharding_for(spec, mesh)
    if tensor.is_jax(local):
        local = local.cpu()
    array = jax.make_array_from_process_local_data(target, dtypes.cpu_to_numpy(local.contiguous()))
    t = tensor.wrap(array)
    tensor.SHARDED[tensor.box_of(t)] = (tuple(array.shape), target)
    return t


def unshard(t: torch.Tensor) -> torch.Tensor:
    """Put `t`'s storage back on one device (JAX's default), forgetting its sharding; returns `t`."""
    box = tensor.box_of(t)
    tensor.SHARDED.pop(box, None)
    box.array = tensor.alias(box.array, jax.device_put(box.array, jax.devices()[0]))
    return t


def sharding(t: torch.Tensor) -> jax.sharding.Sharding:
    """The `jax.sharding.Sharding` of jax tensor `t`'s values: its storage's when `t` spans it,
    else the layout in which a read of the view arrives (as XLA propagates it)."""
    if not tensor.is_jax(t):
        raise TypeError(f"jaxdev.sharding expects a tensor on the jax device, got one on {t.device}")
    return tensor.read(t).sharding


def is_sharded(t: torch.Tensor) -> bool:
    """Whether `t`'s storage was placed with `shard` (and still is)."""
    return tensor.box_of(t) in tensor.SHARDED


# --- modules -------------------------------------------------------------------------------------


def _rule_matches(pattern, name: str) -> bool:
    if isinstance(pattern, re.Pattern):
        return pattern.fullmatch(name) is not None
    return fnmatch.fnmatchcase(name, pattern)


def _rules(rules) -> list:
    if rules is None:
        return []
    if isinstance(rules, Mapping):
        return list(rules.items())
    return list(rules)


def spec_for(name: str, rules, default=None) -> PartitionSpec:
    """The spec of the first rule whose pattern (glob such as "*.weight", or a compiled regex,
    matched against the whole dotted name) matches `name`; `default` (replicated) if none does."""
    for pattern, spec in _rules(rules):
        if _rule_matches(pattern, name):
            return _spec(spec)
    return _spec(default)


def distribute(
    module: torch.nn.Module,
    rules: Mapping | Iterable | None = None,
    *,
    default=None,
    mesh=None,
    buffers: bool = True,
) -> torch.nn.Module:
    """Place every parameter (and buffer) of `module` over the mesh and return `module`.

    `rules` maps parameter names (as in `named_parameters()`) to specs, first match wins: e.g.
    `{"*.weight": P("model", None)}` shards weights' first dim over "model" ("fsdp"-style, for
    models that do not fit one device); unmatched tensors get `default` (None: replicated, the
    data-parallel layout). A module on CPU is moved to `jax` with each tensor going from the host
    straight into its sharding (no device ever holds a whole sharded parameter). Tied parameters
    are placed once."""
    named = list(module.named_parameters(remove_duplicate=True))
    if buffers:
        named += [(n, b) for n, b in module.named_buffers(remove_duplicate=True) if b is not None]
    if any(t.device.type != "jax" for _, t in named):
        targets = {id(t): _sharding_for(spec_for(n, rules, default), mesh) for n, t in named}

        def move(t: torch.Tensor) -> torch.Tensor:
            target = targets.get(id(t))
            if target is None or t.device.type != "cpu":
                return t.to("jax")
            return tensor.wrap(jax.device_put(dtypes.cpu_to_numpy(t.detach().contiguous()), target))

        module._apply(move)  # what Module.to does (Parameter objects, ties), with placed tensors
        named = list(module.named_parameters(remove_duplicate=True))
        if buffers:
            named += [(n, b) for n, b in module.named_buffers(remove_duplicate=True) if b is not None]
    seen: set[int] = set()
    for name, p in named:
        if id(p) in seen or not tensor.is_jax(p):
            continue
        seen.add(id(p))
        shard(p, spec_for(name, rules, default), mesh=mesh)
    return module


def _axes_size(m: Mesh, axes) -> int:
    axes = (axes,) if isinstance(axes, str) else tuple(axes)
    return int(np.prod([m.shape[a] for a in axes]))


def view_sharding(box, shape, strides) -> NamedSharding | None:
    """The layout in which a view (`shape`, `strides`) of sharded box `box` is read: each view dim
    that steps along a storage dim (a slice, a strided slice, a transpose) keeps that dim's mesh
    axes when its size divides evenly; None (XLA's choice) when no dim keeps any. Only a layout:
    the values read are the same whatever it says."""
    kept = tensor.SHARDED.get(box)
    if kept is None or not isinstance(kept[1], NamedSharding):
        return None
    stored, sh = kept
    spec = tuple(sh.spec) + (None,) * (len(stored) - len(sh.spec))
    cs = tensor.contiguous_strides(stored)
    used: set[int] = set()
    out = []
    for n, s in zip(shape, strides):
        entry = None
        if n > 1 and s > 0:
            for k in range(len(stored)):  # outermost first: the largest storage stride that steps this dim
                if k in used or s % cs[k] or (s // cs[k]) * (n - 1) >= stored[k]:
                    continue
                used.add(k)
                if spec[k] is not None and n % _axes_size(sh.mesh, spec[k]) == 0:
                    entry = spec[k]
                break
        out.append(entry)
    if all(e is None for e in out):
        return None
    return NamedSharding(sh.mesh, PartitionSpec(*out))


placement.set_view_sharding(view_sharding)
