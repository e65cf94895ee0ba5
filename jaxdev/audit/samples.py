"""PyTorch's OpInfo database as the auditor's source of samples, never hand-rolled inputs.

Plugins (for tests and experiments) add OpInfos and register their ops: a comma-separated list of
module names or .py paths in JAXDEV_AUDIT_PLUGINS, each defining `OPINFOS`. Workers import the same
plugins, so a test-only op exists wherever its samples run.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import itertools
import os

import torch
from torch.utils._pytree import tree_map

from jaxdev.audit import AuditError, load_module
from jaxdev.audit.facts import (
    ALL_DTYPES,
    BACKWARD_DIRECTIONS,
    COMPILE_DEFAULT_DTYPE,
    DTYPE_NAMES,
    FLOAT8_DTYPES,
    FUSED_DEFAULT_DTYPE,
    MODE_DIRECTIONS,
    MODES,
    cpu_args,
)

PLUGINS_ENV = "JAXDEV_AUDIT_PLUGINS"

# --dtype's names (facts.DTYPE_NAMES but float8) -> the dtypes
DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES if name not in FLOAT8_DTYPES}


def dtype_name(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")


def parse_dtypes(names) -> set[torch.dtype] | None:
    """--dtype's values as dtypes (empty: none named); None for `all` (facts.ALL_DTYPES): every dtype
    an OpInfo runs in, the float8 ones that have no name here included."""
    if ALL_DTYPES in names:
        return None
    return {parse_dtype(d) for d in names}


def parse_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        near = difflib.get_close_matches(name, DTYPES, n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else f"; known: {', '.join(DTYPES)} (or {ALL_DTYPES})"
        raise AuditError(f"unknown dtype {name!r}{hint}")
    return DTYPES[name]


def opinfo_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


@functools.cache
def op_db() -> dict[str, object]:
    """OpInfo name ("add", "linalg.norm.subgradients_at_zero") -> OpInfo, plugins included."""
    from torch.testing._internal.common_methods_invocations import op_db as torch_op_db

    ops = list(torch_op_db)
    for spec in filter(None, os.environ.get(PLUGINS_ENV, "").split(",")):
        try:
            ops.extend(load_module(spec.strip(), "jaxdev_audit_plugin_").OPINFOS)
        except Exception as e:  # a broken plugin is the user's to fix, not a crash
            raise AuditError(f"cannot load audit plugin {spec!r}: {type(e).__name__}: {e}") from e
    return {opinfo_name(op): op for op in ops}


def nearest(name: str, candidates, n: int = 5) -> list[str]:
    from jaxdev.audit import names

    return names.nearest(name, candidates, n)


def select(patterns=(), *, all_reaching: bool = False) -> list[str]:
    """OpInfo names the patterns select (all of op_db when none): OpInfo names and globs, and aten
    names through the index (see jaxdev.audit.names); a pattern that selects nothing is an error."""
    if not patterns:
        return sorted(op_db())
    from jaxdev.audit import names

    return names.opinfos(names.resolve(patterns, op_db(), all_reaching=all_reaching))


@dataclasses.dataclass(frozen=True, order=True)
class Unit:
    """One cell of the matrix: an OpInfo, a dtype, and a direction."""

    op: str
    dtype: str
    direction: str  # forward, backward (eager); compile, compile-backward (torch.compile); fused (fused eager forward)


# The directions that run a subset of dtypes unless dtypes are named, and that subset's dtype.
_DEFAULT_DTYPE = {
    "compile": COMPILE_DEFAULT_DTYPE,
    "compile-backward": COMPILE_DEFAULT_DTYPE,
    "fused": FUSED_DEFAULT_DTYPE,
}


def units(names, dtypes=(), backward=True, mode: str = "eager") -> list[Unit]:
    """The work for these OpInfos in this mode (see facts.MODES): forward directions in every dtype
    the OpInfo runs on CPU, backward ones in every dtype it differentiates there (and runs forward
    in), narrowed to `dtypes` when named; compiled and fused directions in facts' default dtype
    unless dtypes are named."""
    if mode not in MODES:
        raise AuditError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    wanted = parse_dtypes(dtypes)
    directions = [d for d in MODE_DIRECTIONS[mode] if backward or d not in BACKWARD_DIRECTIONS]
    db = op_db()
    out = []
    for name in names:
        op = db[name]
        supported = set(op.supported_dtypes("cpu"))
        # every dtype the OpInfo differentiates on CPU (and runs forward there)
        grads = set(op.supported_backward_dtypes("cpu")) & supported if op.supports_autograd else set()
        for direction in directions:
            chosen = wanted
            if not wanted and wanted is not None:  # none named: the direction's default (None: all)
                chosen = {DTYPES[_DEFAULT_DTYPE[direction]]} if direction in _DEFAULT_DTYPE else None
            pool = grads if direction in BACKWARD_DIRECTIONS else supported
            out += [Unit(name, dtype_name(d), direction) for d in pool if chosen is None or d in chosen]
    return sorted(out)


def samples(unit: Unit, limit: int | None = None, seed: int = 0) -> list:
    """The unit's first `limit` CPU samples (all when None), the same list in every process (seeded).
    Generated lazily: many sample generators are slow, and a sweep uses only the first few."""
    op = op_db()[unit.op]
    seed_all(seed)
    return list(
        itertools.islice(
            op.sample_inputs("cpu", DTYPES[unit.dtype], requires_grad=unit.direction in BACKWARD_DIRECTIONS), limit
        )
    )


def drawn(unit: Unit, limit: int, inputs: str = "sample", seed: int = 0) -> tuple[list, int]:
    """(the samples a cell runs, how many its OpInfo offers: at most limit + 1 counted for sample
    inputs). `inputs` "sample": the first `limit` sample inputs (samples()); "reference": `limit`
    of the OpInfo's reference inputs spread evenly over all of them, the first and last included,
    generated seeded as sample inputs are (the same list in every process)."""
    if inputs == "sample":
        todo = samples(unit, limit + 1, seed)  # one more than run: enough to tell "limited"
        return todo[:limit], len(todo)
    op = op_db()[unit.op]
    seed_all(seed)
    every = list(op.reference_inputs("cpu", DTYPES[unit.dtype], requires_grad=unit.direction in BACKWARD_DIRECTIONS))
    return [every[i] for i in spread(len(every), limit)], len(every)


def spread(total: int, limit: int) -> list[int]:
    """`limit` indices of range(total) spread evenly, the first and last included (all when fewer)."""
    if total <= limit:
        return list(range(total))
    if limit == 1:
        return [0]
    return [round(i * (total - 1) / (limit - 1)) for i in range(limit)]


def seed_all(seed: int) -> None:
    """torch.manual_seed for the two devices in play; torch.manual_seed itself also queues lazy
    seeding for CUDA, XPU and MTIA, formatting a stack trace each time (a tenth of a warm sweep)."""
    torch.default_generator.manual_seed(seed)
    device_module = getattr(torch, "jax", None)  # jaxdev's, or a peer's that names its device jax too
    if device_module is not None:
        device_module.manual_seed_all(seed)


def to_device(sample, device: str, op: str | None = None):
    """A copy of the sample's tensors on `device` (requires_grad kept); device kwargs follow. The
    arguments PyTorch requires on CPU for OpInfo `op` (facts.cpu_args) are copied but stay on CPU."""
    from torch.testing._internal.opinfo.core import SampleInput

    def move_to(target):
        def move(x):
            if isinstance(x, torch.Tensor):
                return _same_layout(x.detach(), target).requires_grad_(x.requires_grad)
            if isinstance(x, torch.device) and x.type == "cpu":
                return torch.device(target)
            return x

        return move

    move, stay = move_to(device), move_to("cpu")
    names, positions = cpu_args(op) if op else ((), ())
    args = tuple(tree_map(stay if i in positions else move, a) for i, a in enumerate(sample.args))
    kwargs = {
        k: device if k == "device" and v == "cpu" else tree_map(stay if k in names else move, v)
        for k, v in sample.kwargs.items()
    }
    return SampleInput(
        tree_map(move, sample.input),
        args=args,
        kwargs=kwargs,
        output_process_fn_grad=sample.output_process_fn_grad,
        broadcasts_input=sample.broadcasts_input,
        name=sample.name,
    )


def _same_layout(x: torch.Tensor, device: str) -> torch.Tensor:
    """`x` on `device` with the same storage layout: a view of a larger storage (as_strided's
    partial views read outside the view) is moved with its whole storage and re-viewed."""
    storage = x.untyped_storage()
    whole = x.storage_offset() == 0 and x.is_contiguous() and x.numel() * x.element_size() == storage.nbytes()
    if whole or x.layout != torch.strided or x.element_size() == 0 or storage.nbytes() % x.element_size():
        return x.to(device)
    flat = torch.empty(0, dtype=x.dtype).set_(storage).to(device)
    return flat.as_strided(x.shape, x.stride(), x.storage_offset()).detach()


def tolerance(unit: Unit) -> tuple[float, float]:
    """(atol, rtol): assert_close's defaults for the dtype, widened by the OpInfo's own
    toleranceOverride for comparing a device against CPU (test_compare_cpu) or for any test."""
    from torch.testing._comparison import default_tolerances

    dtype = DTYPES[unit.dtype]
    rtol, atol = default_tolerances(dtype)
    op = op_db()[unit.op]
    for info in getattr(op, "decorators", ()) or ():
        if getattr(info, "test_name", None) not in (None, "test_compare_cpu"):
            continue
        if getattr(info, "active_if", True) is not True or getattr(info, "device_type", None) not in (None, "cpu"):
            continue
        for deco in getattr(info, "decorators", ()):
            t = getattr(deco, "d", {}).get(dtype) if isinstance(getattr(deco, "d", None), dict) else None
            if t is not None:
                atol, rtol = max(atol, t.atol), max(rtol, t.rtol)
    return atol, rtol
