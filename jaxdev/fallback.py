"""CPU fallback: any op without a jax kernel runs on CPU, its results copied back to `jax`.

Policy from the environment variable JAXDEV_FALLBACK (read at each call, so tests may change it):
  warn    (default) run on CPU and warn once per op
  silent  run on CPU
  error   raise NotImplementedError naming the op
Every fallback call is counted: `fallback_counts()` returns {op name: calls}.

In-place and out= arguments are written back into the original jax tensors through their strides,
so aliases see the change. An op that returns a view of its input cannot be emulated on CPU (the
alias would be lost): it raises instead of returning a silent copy.
"""

from __future__ import annotations

import collections
import os
import warnings

import torch
from torch.utils._pytree import tree_map

from jaxdev import layout, tensor, tracing
from jaxdev.core.placement import reshard_like
from jaxdev.tensor import is_jax

_counts: collections.Counter[str] = collections.Counter()
_warned: set[str] = set()

# Ops where PyTorch itself accepts CPU tensors next to device tensors (index tensors).
_MIXED_DEVICE_OK = {"aten::index.Tensor", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_"}

_LIB = torch.library.Library("_", "IMPL")


class FallbackError(NotImplementedError):
    pass


class PlatformGapError(FallbackError):
    """The platform's XLA lacks the op's kernel for the dtype (jaxdev/ops/kit/capabilities.py's gaps: a
    TPU's float64 LU, any SVD there), and JAXDEV_FALLBACK=error forbids serving it on CPU."""


def mode() -> str:
    value = os.environ.get("JAXDEV_FALLBACK", "warn").lower()
    if value not in ("warn", "error", "silent"):
        raise ValueError(f"JAXDEV_FALLBACK must be warn, error or silent, not {value!r}")
    return value


def fallback_counts() -> dict[str, int]:
    return dict(_counts)


def reset_fallback_counts() -> None:
    _counts.clear()
    _warned.clear()


def _schema_value(schema, i, args, kwargs):
    arg = schema.arguments[i]
    if arg.kwarg_only or i >= len(args):
        return kwargs.get(arg.name)
    return args[i]


def _check_devices(name, args, kwargs):
    if name in _MIXED_DEVICE_OK or name.split(".")[0] in _MIXED_DEVICE_OK:
        return
    found = []
    tree_map(lambda x: found.append(x) if isinstance(x, torch.Tensor) else None, (args, kwargs))
    cpu = [t for t in found if t.device.type != "jax" and t.dim() > 0]
    if cpu and any(is_jax(t) for t in found):
        raise tensor.mixed_devices(cpu[0].device)


def _any_traced(args, kwargs) -> bool:
    found = []
    tree_map(
        lambda x: (
            found.append(x)
            if is_jax(x) and x.layout == torch.strided and tracing.is_traced(tensor.box_of(x).array)
            else None
        ),
        (args, kwargs),
    )
    return bool(found)


def admit(op, args, kwargs, *, view_of: str, kernel: str) -> None:
    """The checks and bookkeeping every CPU fallback shares (the dense one here, the sparse one in
    ops/sparse.py): no view results (a CPU copy would break the alias), CPU's device rules, no traced
    values, then counted and warned once. `view_of` and `kernel` word the messages."""
    name = op.name()
    if any(r.alias_info is not None and not r.alias_info.is_write for r in op._schema.returns):
        raise FallbackError(
            f"{name} returns a view of {view_of} and has no {kernel}; a CPU fallback would "
            "break the alias, so jaxdev refuses to run it"
        )
    _check_devices(name, args, kwargs)
    if _any_traced(args, kwargs):
        raise FallbackError(
            f"{name} has no {kernel}, and its CPU fallback needs values, which a compiled program "
            "does not have while it is traced"
        )
    _counts[name] += 1
    if mode() == "warn" and name not in _warned:
        _warned.add(name)
        warnings.warn(
            f"jaxdev: {name} has no {kernel}; running it on CPU (set JAXDEV_FALLBACK=silent "
            "to hide this warning, or =error to forbid it)",
            stacklevel=3,
        )


def run_on_cpu(op, *args, **kwargs):
    return run_on_cpu_lacking(op, "jax kernel", args, kwargs)


def run_on_cpu_lacking(op, kernel: str, args, kwargs, gap: bool = False):
    """`op` on CPU because jax lacks `kernel` for it ("jax kernel"; "float64 kernel on TPU (...)": a
    platform's gap, `gap`, jaxdev/ops/kit/capabilities.py), which the warning and the refusals name."""
    name = op.name()
    policy = mode()
    if policy == "error":
        refusal = PlatformGapError if gap else FallbackError
        raise refusal(f"{name} has no {kernel}, and JAXDEV_FALLBACK=error forbids running it on CPU")
    schema = op._schema
    admit(op, args, kwargs, view_of="its input", kernel=kernel)

    originals: dict[int, torch.Tensor] = {}

    def to_cpu(x):
        if is_jax(x):
            # clone(): a torch-owned (resizable) CPU tensor, since out= arguments may be resized
            c = tensor.to_cpu(tensor.read(x), x.dtype).clone()
            originals[id(c)] = x
            return c
        if isinstance(x, torch.device) and x.type == "jax":
            return torch.device("cpu")
        return x

    cpu_args = tree_map(to_cpu, args)
    cpu_kwargs = tree_map(to_cpu, kwargs)
    if isinstance(cpu_kwargs.get("device"), str) and cpu_kwargs["device"].startswith("jax"):
        cpu_kwargs["device"] = "cpu"
    result = op(*cpu_args, **cpu_kwargs)

    # Write mutated arguments back into the jax tensors they came from.
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            changed = _schema_value(schema, i, cpu_args, cpu_kwargs)
            for c in changed if isinstance(changed, (list, tuple)) else [changed]:
                if isinstance(c, torch.Tensor) and id(c) in originals:
                    original = originals[id(c)]
                    if tuple(original.shape) != tuple(c.shape):
                        original.resize_(c.shape)
                    tensor.write(original, tensor.from_cpu(c))
                    # Ops without an ADInplaceOrView kernel (custom ops) would not bump it.
                    torch.autograd.graph.increment_version(original)

    def to_jax(x):
        if isinstance(x, torch.Tensor):
            if id(x) in originals:
                return originals[id(x)]
            value = tensor.from_cpu(x)
            if (
                tensor.SHARDED_ENTRIES
            ):  # a result shaped like a sharded input gets its sharding back (jaxdev/core/placement.py)
                value = reshard_like(value, originals.values())
            if not layout.is_plain(x) and x.numel() and tensor.is_non_overlapping_and_dense(x):
                # CPU's own layout (LAPACK's column-major results: inv, lu_factor, lstsq), as CPU returns it
                out = tensor.empty(x.shape, x.dtype, x.stride())
                tensor.write(out, value)
                return out
            return tensor.wrap(value)
        return x

    return tree_map(to_jax, result)


_LIB.fallback(run_on_cpu, "PrivateUse1")


def round_trip(op, args, kwargs, copy_to_cpu):
    """`op` run on CPU copies of its jax arguments, for layouts the dense fallback cannot carry (sparse,
    nested): `copy_to_cpu(t)` makes each jax tensor's CPU copy, `device=jax` becomes CPU, arguments the
    op writes are written back into their jax originals, and results come back on jax (an argument
    returned is its jax original)."""
    originals: dict[int, torch.Tensor] = {}

    def to_cpu(x):
        if is_jax(x):
            c = copy_to_cpu(x)
            originals[id(c)] = x
            return c
        if isinstance(x, torch.device) and x.type == "jax":
            return torch.device("cpu")
        return x

    cpu_args, cpu_kwargs = tree_map(to_cpu, args), tree_map(to_cpu, kwargs)
    if isinstance(cpu_kwargs.get("device"), str) and cpu_kwargs["device"].startswith("jax"):
        cpu_kwargs["device"] = "cpu"
    result = op(*cpu_args, **cpu_kwargs)
    for i, arg in enumerate(op._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            changed = _schema_value(op._schema, i, cpu_args, cpu_kwargs)
            for c in changed if isinstance(changed, (list, tuple)) else [changed]:
                if isinstance(c, torch.Tensor) and id(c) in originals:
                    with torch.no_grad():
                        originals[id(c)].copy_(c.to("jax"))

    def to_jax(x):
        if isinstance(x, torch.Tensor):
            return originals[id(x)] if id(x) in originals else x.to("jax")
        return x

    return tree_map(to_jax, result)
