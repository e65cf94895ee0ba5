"""Direct trials: an aten overload that no OpInfo sample reaches, run on `jax:0` and on CPU with
inputs built from its schema, and compared.

Inputs. Every argument is built from its schema type (torch._C schema, `real_type`) and its name:
tensors are small seeded random tensors (normal floats, integers in [0, 3), random bools), all of
one shape and dtype per candidate, except index-like arguments (`index`, `indices`, ...: int64 in
[0, 2]); optional arguments take their default (None when they have none); ints, int lists, floats,
strings and Scalars take small plausible values chosen by the argument's name (`dim` 0,
`kernel_size` 2s, `stride` 1s, `size` the tensors' shape, `reduce` "sum", ...); out= tensors are
empty and resized by the op. Candidates are tried in order (shapes (3, 3), (2, 3, 3), (5,), (),
(2, 3, 4, 4), ... times dtypes float32, int64, bool, complex64, float64, times out= dtypes) until
CPU accepts one; that one is run on jax and compared. A CPU that rejects every candidate gives
`untriable` ("no valid sample found"): the schema alone did not tell how to call it, which says
nothing about jax. Candidate order: arguments captured from OpInfo samples of a sibling overload
(donors), then the family's argument builder where arg_hints has one (consistent shapes for
convolutions, RNNs, fused optimisers, losses, backward ops, ...), then the schema-built ones. An
out= overload first takes its out= dtypes (and count, and then also sizes) from its functional
overload's results on the same inputs (LIKE, LIKE_SIZED).

Judging reuses the auditor's rules (check.py): `compare` for values, dtypes and shapes (the
dtype's assert_close tolerances), `_stride_mismatch`, `_exception_status` for a raise on jax, and
the fallback counter. The result is the op's return value plus every argument the schema marks as
written (in-place self, out=). Allocations of uninitialised memory (empty*) and ops whose CPU
results differ between runs under other seeds (random ops, unless these inputs leave nothing
random: dropout 0) are compared by shape and dtype only. Decompositions whose factors are unique
only up to signs, phases or order (svd, eig, eigh, qr: GAUGE) are compared gauge-free when they
differ as they are.

Trials run in worker processes (`python -m jaxdev.audit.schema_samples IN_FD OUT_FD`), one
overload at a time with a time limit: a crash or a hang costs that overload, not the run. The
worker says which phase it is in (cpu: searching a candidate; jax: running it) so the parent can
tell a CPU kernel that crashed (untriable) from a jax one (fails, crash/timeout).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import wait

from jaxdev.audit import arg_hints, runner

# Untriable categories (the `category` of an untriable verdict), decided before running anything
# except no_valid_sample, cpu_crash (found by running) and unsupported (jax raised UnsupportedError).
UNTRIABLE = {
    "sparse": "sparse layouts: jax tensors are dense and strided by design",
    "quantized": "quantized tensors: jaxdev has no quantized dtypes",
    "no_cpu_kernel": "no CPU kernel to compare with (only CUDA, MPS, MKLDNN, ... kernels)",
    "no_tensor": "no tensor or device argument: nothing of it runs on jax",
    "argument": "an argument type the schema cannot be built for",
    "no_valid_sample": "no valid sample found: CPU rejected every candidate built from the schema",
    "cpu_crash": "the CPU kernel crashed or hung on a candidate",
    "unsupported": "jaxdev cannot hold these tensors by design (UnsupportedError)",
    "python": "no Python OpOverload for it (torch.ops cannot call it)",
    "nested": "nested tensors: jax tensors are dense and strided by design",
    "host_only": "pins host memory: it takes CPU tensors on every device (a CUDA tensor's raises too)",
}
_HOST_ONLY = frozenset({"pin_memory", "_pin_memory"})

SHAPES = ((3, 3), (2, 3, 3), (5,), (), (2, 3, 4, 4), (2, 3, 4), (1, 2, 3, 4, 4), (4, 1))
DTYPE_NAMES = ("float32", "int64", "bool", "complex64", "float64")
INDEX_NAMES = frozenset(
    {"index", "indices", "idx", "offsets", "lengths", "batch_sizes", "indices_or_sections", "crow_indices"}
)
LIKE = "like"  # out= plan: the dtypes (and count) of the functional overload's results on the same inputs
LIKE_SIZED = "like_sized"  # the same, out= tensors already of the results' shapes (ops that do not resize)
HINT_DTYPES = ("float32", "float64")  # candidate dtypes of an arg_hints builder
MAX_CANDIDATES = 1000  # CPU attempts per overload before giving up (each costs microseconds to milliseconds)
DEFAULT_TIMEOUT_S = 30.0
MAX_FAILED_STARTS = 3

_SPARSE_WORDS = ("sparse", "_csr", "_csc", "_bsr", "_bsc", "coo", "_nnz", "coalesce", "crow_", "ccol_")
_SPARSE_NAMES = frozenset(
    {"indices", "values", "_indices", "_values", "col_indices", "row_indices", "dense_dim", "sparse_dim", "_to_dense"}
    # the copies of sparse views, and products defined for a sparse self only
    | {"indices_copy", "values_copy", "_indices_copy", "_values_copy", "col_indices_copy", "row_indices_copy"}
    | {"smm", "sspaddmm", "_spdiags"}  # _spdiags builds a sparse tensor (its layout= is a sparse one)
)
# Arguments PyTorch requires on CPU whatever the op's device (like facts.CPU_ARGS for OpInfos).
CPU_ARGS = {"aten::tensor_split": ("tensor_indices_or_sections",), "aten::randint_like": ("high",)}
# out= tensors PyTorch requires on CPU (the results its functional form returns on CPU on any device).
CPU_OUTS = {"aten::_pack_padded_sequence.out": ("out1",)}
# Results that name the device itself (get_device: -1 on CPU, the index on jax): compared by type.
DEVICE_RESULTS = frozenset({"aten::get_device"})
UNCHECKED = "values unchecked: random op, uninitialised memory or a device-dependent result"
_UNBUILDABLE = ("Storage", "Stream", "CellParamsBase", "QScheme", "Dict")


# ---------------------------------------------------------------------------------------------
# Static classification (parent side: needs torch, runs nothing)


def static_untriable(name: str) -> tuple[str, str] | None:
    """(category, reason) when the overload cannot be tried by construction; None when it can."""
    import torch

    from jaxdev.audit import dispatch

    short = name.split("::", 1)[1]
    base = short.split(".")[0]
    op = dispatch.overload(name)
    if op is None:
        return "python", UNTRIABLE["python"]

    def has(key: str) -> bool:
        return torch._C._dispatch_has_kernel_for_dispatch_key(name, key)

    if not torch._C._dispatch_has_schema(name) if hasattr(torch._C, "_dispatch_has_schema") else False:
        return "python", UNTRIABLE["python"]
    dense = any(
        has(k)
        for k in (
            "CPU",
            "CompositeExplicitAutograd",
            "CompositeExplicitAutogradNonFunctional",
            "CompositeImplicitAutograd",
        )
    )
    sparse_keys = any(has(k) for k in ("SparseCPU", "SparseCsrCPU", "SparseMeta", "SparseCsrMeta"))
    if (sparse_keys and not dense) or any(w in base for w in _SPARSE_WORDS) or base in _SPARSE_NAMES:
        return "sparse", UNTRIABLE["sparse"] + f" ({base})"
    if "nested" in base:
        return "nested", UNTRIABLE["nested"] + f" ({base})"
    if base in _HOST_ONLY:
        return "host_only", UNTRIABLE["host_only"]
    schema = str(op._schema)
    quant_name = ("quantize" in base and "fake_quantize" not in base) or base.startswith(("q_", "_make_per_"))
    if quant_name or base in ("int_repr", "qscheme") or (has("QuantizedCPU") and not dense) or "QScheme" in schema:
        return "quantized", UNTRIABLE["quantized"] + f" ({base})"
    if not dense:
        keys = [k for k in ("CUDA", "MPS", "MkldnnCPU", "XPU", "Meta") if has(k)]
        return "no_cpu_kernel", UNTRIABLE["no_cpu_kernel"] + (f": {', '.join(keys)}" if keys else "")
    hinted = arg_hints.hinted_types(base) if any(u in str(op._schema) for u in _UNBUILDABLE) else {}
    for a in op._schema.arguments:
        t = str(a.real_type)
        if any(u in t for u in _UNBUILDABLE) and t not in hinted.get(a.name, ()):
            return "argument", f"{UNTRIABLE['argument']}: {a.name} is {t}"
    args = op._schema.arguments
    if not any("Tensor" in str(a.real_type) or "Device" in str(a.real_type) for a in args):
        return "no_tensor", UNTRIABLE["no_tensor"]
    return None


# ---------------------------------------------------------------------------------------------
# Building candidates (worker side)


def _is_out(a) -> bool:
    return a.kwarg_only and a.alias_info is not None and a.alias_info.is_write


def _int_list(name: str, n: int | None, shape: tuple) -> list[int]:
    """A plausible int list for an argument named `name` of fixed length `n` (None: any)."""
    spatial = n or 2
    if name in ("size", "shape", "sizes") or (name == "output_size" and not n):
        return list(shape)
    if name in ("dims", "perm"):
        return list(range(len(shape)))
    if name == "dim":
        return [0] if shape else []
    if name in ("kernel_size", "output_size"):
        return [2] * spatial
    if name == "stride" and not n:  # as_strided and friends: the contiguous strides of the shape
        strides, step = [], 1
        for d in reversed(shape):
            strides.insert(0, step)
            step *= d
        return strides
    if name in ("stride", "dilation"):
        return [1] * spatial
    if name in ("padding", "output_padding"):
        return [0] * spatial
    if name == "pad":
        return [1, 1]
    if name == "repeats":
        return [1] * max(len(shape), 1)
    if name in ("split_sizes", "split_size"):
        return [1, shape[0] - 1] if shape and shape[0] > 1 else [1]
    return [1] * (n or len(shape) or 1)


_INTS = {
    "dim": 0,
    "dim0": 0,
    "dim1": 1,
    "start": 0,
    "end": 2,
    "length": 1,
    "groups": 1,
    "diagonal": 0,
    "offset": 0,
    "padding_idx": -1,
    "reduction": 1,
    "ignore_index": -100,
    "num_classes": 3,
    "high": 3,
    "low": 0,
    "to": 3,
    "from": 0,
    "repeats": 2,
    "split_size": 1,
    "chunks": 1,
    "sections": 1,
    "window_length": 4,
    "bins": 4,
    "minlength": 0,
    "n": 2,
    "N": 3,
    "k": 1,
    "correction": 1,
    "step": 1,
    "num_samples": 2,
    "batch_dim": 0,
    "level": 0,
}
_STRINGS = {
    "reduce": "sum",
    "reduction": "mean",
    "mode": "constant",
    "padding_mode": "zeros",
    "interpolation": "linear",
    "side": "left",
    "approximate": "none",
    "padding": "valid",
    "rounding_mode": "trunc",
    "indexing": "ij",
    "norm": "backward",
    "driver": "gesvd",
    "UPLO": "L",
}


class _Unbuildable(Exception):
    pass


class _NoFunctional(Exception):
    """An out= plan LIKE without a functional overload to follow: the candidate is skipped."""


def _make_tensor(shape, dtype, gen, index: bool = False):
    import torch

    if index:
        return torch.randint(0, 2, shape, generator=gen, dtype=torch.int64)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=gen, dtype=dtype)
    return torch.randint(0, 3, shape, generator=gen, dtype=dtype)


def candidates(op, limit: int = MAX_CANDIDATES):
    """(plan, builder) for each candidate: builder(device, seed) -> (kwargs, written), the same
    values on every call with the same seed; `written` names the arguments the op writes.
    Order: variants (optionals left None / required optionals filled / every optional scalar or
    tensor filled; tensors other than the first one 0-d or not), then shapes, dtypes, out= dtypes."""
    import torch

    schema = op._schema
    args = schema.arguments
    outs = [a for a in args if _is_out(a)]
    out_plans: list[tuple] = [()]
    if outs:
        out_plans = []
        for d in (None, "float32", "int64", "bool"):
            plan = tuple("int64" if a.name in INDEX_NAMES else d for a in outs)
            # values and indices (max.dim_max names its indices `max_values`)
            pair = (d,) + ("int64",) * (len(outs) - 1)
            for p in (plan, pair):
                if p not in out_plans:
                    out_plans.append(p)
        out_plans[:0] = [LIKE, LIKE_SIZED]
    count = 0
    hint = arg_hints.hint_for(str(schema.name).split("::", 1)[-1])
    if hint is not None:
        for dname in HINT_DTYPES:
            for out_plan in out_plans:
                count += 1
                yield ("hint", dname, out_plan), _builder(op, (), getattr(torch, dname), out_plan, hint=hint)
    tensors = [a for a in args if not _is_out(a) and "Tensor" in str(a.real_type)]
    optionals = [a for a in args if str(a.real_type).startswith("Optional[")]
    required = [a.name for a in optionals if not a.has_default_value()]
    fills = (
        [0]
        + ([1] if required else [])
        + ([2] if optionals else [])
        + ([("one", n) for n in required] * (len(required) > 1))
    )
    scalar_others = [False, True] if len(tensors) > 1 else [False]
    for fill in fills:
        for zero_d in scalar_others:
            for shape in SHAPES:
                for dname in DTYPE_NAMES:
                    for out_plan in out_plans:
                        count += 1
                        if count > limit:
                            return
                        plan = (shape, dname, out_plan, fill, zero_d)
                        yield plan, _builder(op, shape, getattr(torch, dname), out_plan, fill, zero_d)


def _builder(op, shape, dtype, out_plan, fill: int = 0, zero_d: bool = False, given: dict | None = None, hint=None):
    """`given`: argument values taken from a captured call (OpInfo donors): used as they are.
    `hint`: an arg_hints builder, called per build with its own generator (seeded like the rest),
    its values fitted to the schema (_fit_hint). `out_plan` LIKE: out= tensors of the dtypes (and
    count) the functional overload returns on the same inputs on CPU (_like_functional)."""
    import torch

    schema = op._schema
    has_tensor = any("Tensor" in str(a.real_type) for a in schema.arguments if not _is_out(a))
    first_tensor = next((a.name for a in schema.arguments if "Tensor" in str(a.real_type)), None)
    stay_on_cpu = CPU_ARGS.get(str(schema.name), ())

    def build_cpu_arg(a, gen):
        return _make_tensor((), torch.int64, gen) + 1 if a.name == "high" else torch.tensor([1, 2])

    def build(device: str, seed: int):
        gen = torch.Generator().manual_seed(seed)
        kwargs: dict = {}
        written: list[str] = []
        like = out_plan in (LIKE, LIKE_SIZED)
        outs = iter(() if like else out_plan)
        given_now = given
        if hint is not None:
            given_now = _fit_hint(hint(arg_hints.Ctx(torch.Generator().manual_seed(seed + 7919), dtype)), schema)
        out_args = []

        def tensor(name, role_shape=None):
            if name in INDEX_NAMES:
                return _make_tensor((2,), torch.int64, gen, index=True).to(device)
            kind = torch.bool if "mask" in name else dtype
            shaped = () if zero_d and name != first_tensor else shape if role_shape is None else role_shape
            return _make_tensor(shaped, kind, gen).to(device)

        for a in schema.arguments:
            t = str(a.real_type)
            name = a.name
            if a.alias_info is not None and a.alias_info.is_write:
                written.append(name)
            if _is_out(a):
                out_args.append(a)
                continue
            if given_now is not None and name in given_now:
                kwargs[name] = _place(given_now[name], device)
                continue
            if name in stay_on_cpu:
                kwargs[name] = build_cpu_arg(a, gen)
                continue
            optional = t.startswith("Optional[")
            if optional:
                filled = fill == 2 or (fill == 1 and not a.has_default_value()) or fill == ("one", name)
                if not filled or t in ("Optional[Generator]", "Optional[Layout]", "Optional[MemoryFormat]"):
                    if not a.has_default_value():
                        kwargs[name] = None
                    elif name == "device" and not has_tensor:
                        kwargs[name] = torch.device(device)
                    continue
                if t == "Optional[bool]" and a.has_default_value():
                    continue
                t = t[len("Optional[") : -1]
            elif a.has_default_value() and not (name == "device" and not has_tensor):
                continue  # the op's own default
            if t == "Tensor":
                kwargs[name] = tensor(name)
            elif t == "List[Tensor]":
                kwargs[name] = [tensor(name), tensor(name)]
            elif t == "List[Optional[Tensor]]":
                kwargs[name] = [_make_tensor((2,), torch.int64, gen, index=True).to(device)]
            elif t in ("Optional[Device]", "Device"):
                kwargs[name] = torch.device(device) if not has_tensor or t == "Device" else None
            elif t in ("int", "SymInt"):
                kwargs[name] = _INTS.get(name, 1)
            elif t == "float":
                kwargs[name] = 0.5
            elif t == "bool":
                kwargs[name] = False
            elif t == "number":
                kwargs[name] = 2
            elif t == "str":
                kwargs[name] = _STRINGS.get(name, "sum")
            elif t in ("List[int]", "List[SymInt]"):
                kwargs[name] = _int_list(name, a.N, shape)
            elif t == "List[number]":
                kwargs[name] = [2, 2]
            elif t == "List[float]":
                kwargs[name] = [0.5] * (a.N or 2)
            elif t == "List[bool]":
                kwargs[name] = [True] * (a.N or 3)
            elif t == "ScalarType":
                kwargs[name] = dtype
            elif t == "Layout":
                kwargs[name] = torch.strided
            elif t == "MemoryFormat":
                kwargs[name] = torch.contiguous_format
            elif t == "Device":
                kwargs[name] = torch.device(device)
            else:
                raise _Unbuildable(f"{name}: {a.real_type}")
        if like and out_args:
            # (dtype, shape) per out= tensor, a list of them for a Tensor[] one
            metas = _like_functional(op, out_args, kwargs, dtype)
        else:
            metas = []
            for a in out_args:
                d = next(outs, None)
                meta = (dtype if d is None else getattr(torch, d), (0,))
                metas.append([meta, meta] if str(a.real_type).startswith("List") else meta)
        on_cpu = CPU_OUTS.get(op.name(), ())

        def empty(meta, name):
            size = meta[1] if out_plan == LIKE_SIZED else (0,)
            return torch.empty(size, dtype=meta[0], device="cpu" if name in on_cpu else device)

        for a, meta in zip(out_args, metas):
            kwargs[a.name] = [empty(m, a.name) for m in meta] if isinstance(meta, list) else empty(meta, a.name)
        return kwargs, written

    return build


def _functional_of(op):
    """The overload of the same name whose arguments are this out= overload's inputs and that
    writes nothing (`fft_rfft` for `fft_rfft.out`), or None."""
    import torch

    schema = op._schema
    inputs = [a.name for a in schema.arguments if not _is_out(a)]
    namespace, base = str(schema.name).split("::", 1)
    packet = getattr(getattr(torch.ops, namespace), base, None)
    for name in packet.overloads() if packet is not None else ():
        candidate = getattr(packet, name)
        args = candidate._schema.arguments
        if any(a.alias_info is not None and a.alias_info.is_write for a in args):
            continue
        if [a.name for a in args] == inputs:
            return candidate
    return None


def _like_functional(op, out_args, kwargs, dtype) -> list:
    """(dtype, shape) per out= tensor (a list of them for a Tensor[] out) from the functional
    overload's results on these inputs on CPU (an undefined result: the candidate's dtype, empty);
    raises when there is no functional overload or it rejects the inputs (the candidate is skipped)."""
    import torch
    from torch.utils._pytree import tree_flatten

    functional = _functional_of(op)
    if functional is None:
        raise _NoFunctional(f"{op._schema.name} has no functional overload to take out= dtypes from")
    results = functional(**_to(dict(kwargs), "cpu"))
    leaves = [r for r in tree_flatten(results)[0] if r is None or isinstance(r, torch.Tensor)]
    metas = [(dtype, (0,)) if r is None else (r.dtype, tuple(r.shape)) for r in leaves]
    if len(out_args) == 1 and str(out_args[0].real_type).startswith("List"):
        return [metas]
    if len(metas) < len(out_args):
        raise _NoFunctional(f"{functional._schema.name} returns {len(metas)} tensors for {len(out_args)} out= ones")
    return metas[: len(out_args)]


def _fit(value, t: str):
    """(fits, value) for a hint's value and the schema type `t` of the argument (numbers and int
    lists become tensors where the overload takes a Tensor)."""
    import torch

    if isinstance(value, arg_hints.ByType):
        inner = t[len("Optional[") : -1] if t.startswith("Optional[") else t
        for key in (t, inner):
            if key in value.by_type:
                return True, value.by_type[key]
        return False, None
    optional = t.startswith("Optional[")
    inner = t[len("Optional[") : -1] if optional else t
    if value is None:
        return optional, None
    if isinstance(value, arg_hints.OnCpu):
        return inner == "Tensor", value
    if isinstance(value, arg_hints.StorageOf):
        return inner == "Storage", value
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if inner == "Tensor":
        if isinstance(value, torch.Tensor):
            return True, value
        if number or (isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value)):
            return True, torch.tensor(value)
        return False, None
    if inner == "str":
        return isinstance(value, str), value
    if inner in ("int", "SymInt"):
        return isinstance(value, int) and not isinstance(value, bool), value
    if inner in ("float", "number"):
        return number, value
    if inner == "bool":
        return isinstance(value, bool), value
    if inner.startswith("List["):
        return isinstance(value, (list, tuple)), value
    return not isinstance(value, (str, list, tuple, torch.Tensor)), value


def _fit_hint(values: dict, schema) -> dict:
    """The hint's values for the arguments this overload has, where they fit its types."""
    out = {}
    for a in schema.arguments:
        if a.name in values and not _is_out(a):
            fits, value = _fit(values[a.name], str(a.real_type))
            if fits:
                out[a.name] = value
    return out


def _place(value, device: str):
    """A given argument on the trial's device (OnCpu ones stay on CPU, StorageOf gives a storage)."""
    if isinstance(value, arg_hints.OnCpu):
        return _to(value.value, "cpu")
    if isinstance(value, arg_hints.StorageOf):
        return _to(value.tensor, device).untyped_storage()
    return _to(value, device)


def _to(value, device: str):
    """A captured argument for `device`: tensors copied there (fresh copies: ops write into them)."""
    import torch
    from torch.utils._pytree import tree_map

    def move(x):
        if isinstance(x, torch.Tensor):
            return x.detach().clone().to(device)
        if isinstance(x, torch.device):
            return torch.device(device)
        if isinstance(x, torch.UntypedStorage):  # a copy of its bytes on `device`
            as_bytes = torch.empty(0, dtype=torch.uint8, device=x.device).set_(x)
            return as_bytes.clone().to(device).untyped_storage()
        return x

    return tree_map(move, value)


class _Capture:
    """A dispatch mode recording the first call of the overload `target` (its arguments by schema
    name, tensors copied) while an OpInfo sample runs on CPU."""

    def __new__(cls, target: str):
        from torch.utils._python_dispatch import TorchDispatchMode

        class Capture(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.args = None

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if self.args is None and func.name() == target:
                    named = dict(zip((a.name for a in func._schema.arguments), args))
                    named.update(kwargs)
                    self.args = _to(named, "cpu")
                return func(*args, **kwargs)

        return Capture()


def donor_candidates(op, donors) -> list:
    """(plan, builder) from OpInfo samples: for each (overload Y, OpInfo) in `donors`, the arguments
    of Y's first call while the OpInfo's first samples run on CPU (forward, then backward),
    given to this overload by argument name (out= tensors fresh, the rest from the schema)."""
    import torch

    from jaxdev.audit import check, samples

    out = []
    for target, opinfo in donors:
        try:
            info = samples.op_db().get(opinfo)
            if info is None:
                continue
            cpu_dtypes = info.supported_dtypes("cpu")
            dtype = torch.float32 if torch.float32 in cpu_dtypes else sorted(cpu_dtypes, key=str)[0]
            captured = None
            for direction in ("forward", "backward"):
                if direction == "backward" and not info.supports_autograd:
                    continue
                unit = samples.Unit(opinfo, samples.dtype_name(dtype), direction)
                for sample in samples.samples(unit, 3):
                    capture = _Capture(target)
                    with contextlib.suppress(Exception), capture:
                        check._call(info, sample, direction == "backward")
                    if capture.args is not None:
                        captured = capture.args
                        break
                if captured is not None:
                    break
        except Exception:
            continue
        if captured is None:
            continue
        for d in (LIKE, LIKE_SIZED, None, "int64", "bool", "float32"):
            plan = ("donor", target, opinfo, d)
            outs = d if d in (LIKE, LIKE_SIZED) else tuple(d for a in op._schema.arguments if _is_out(a))
            out.append((plan, _builder(op, (), dtype, outs, 0, False, given=captured)))
    return out


def describe(name: str, plan, kwargs) -> str:
    """A repro line: the overload, then each argument (tensors as dtype[shape])."""
    import torch

    def show(v):
        if isinstance(v, torch.Tensor):
            return f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(show(x) for x in v) + "]"
        if isinstance(v, torch.device):
            return "'jax'"  # the device argument: CPU for the reference run, jax for the trial
        if isinstance(v, torch.UntypedStorage):
            return f"UntypedStorage[{v.nbytes()} bytes]"
        return repr(v)

    return f"{name}(" + ", ".join(f"{k}={show(v)}" for k, v in kwargs.items()) + ")"


# ---------------------------------------------------------------------------------------------
# Decompositions whose factors are unique only up to a gauge (signs or phases of singular vectors,
# eigenvectors, Q's columns; the order of eigenvalues): compared once both sides are normalised.

# family -> kind: svd with V (columns) or Vh (rows), eigh, eig, eigvals, qr
GAUGE = {
    "svd": "svd_v",
    "linalg_svd": "svd_vh",
    "_linalg_svd": "svd_vh",
    "linalg_eigh": "eigh",
    "_linalg_eigh": "eigh",
    "linalg_eig": "eig",
    "_linalg_eig": "eig",
    "linalg_eigvals": "eigvals",
    "qr": "qr",
    "linalg_qr": "qr",
}
GAUGE_NOTE = "equal to CPU up to what the decomposition leaves unspecified (signs/phases of vectors, eigenvalue order)"


def _projectors(vectors):
    """v v^H per column (the last dim indexes the vectors): invariant to each column's phase."""
    return vectors.unsqueeze(-2) * vectors.conj().unsqueeze(-3)  # (..., n, n, k) -> by column k


def _canonical(kind: str, outs: tuple) -> tuple:
    """What the decomposition determines: singular values / eigenvalues (sorted where the order is
    free), the rank-one projectors of each vector, the reconstruction of the factored matrix
    (svd, qr), R with a real non-negative diagonal (qr)."""
    import torch

    if kind in ("svd_v", "svd_vh"):
        u, s, v = outs[:3]
        if u.numel() == 0 or v.numel() == 0:  # compute_uv=False: nothing but S is specified
            return (u.shape, s, v.shape)
        k = s.shape[-1]
        v = v[..., :k] if kind == "svd_v" else v[..., :k, :].mT.conj()
        u = u[..., :k]
        return (s, _projectors(u), _projectors(v), (u * s.unsqueeze(-2).to(u.dtype)) @ v.mT.conj())
    if kind == "eigh":
        values, vectors = outs[:2]
        return (values,) if vectors.numel() == 0 else (values, _projectors(vectors))
    if kind in ("eig", "eigvals"):
        values = outs[0] if kind == "eig" else outs
        # by real part (rounded: a conjugate pair's real parts may differ in the last bits), then
        # imaginary part: a stable sort by the first key after one by the second
        order = torch.sort(values.imag, dim=-1, stable=True).indices
        by_real = torch.take_along_dim(values.real.to(torch.float64).round(decimals=4), order, -1)
        order = torch.take_along_dim(order, torch.sort(by_real, dim=-1, stable=True).indices, -1)
        values = torch.take_along_dim(values, order, -1)
        if kind == "eigvals":
            return (values,)
        vectors = torch.take_along_dim(outs[1], order.unsqueeze(-2), -1)
        return (values, _projectors(vectors))
    if kind == "qr":
        q, r = outs[:2]
        if q.numel() == 0:  # mode "r"
            return (q.shape, r.abs())
        k = min(r.shape[-2], r.shape[-1])
        d = torch.diagonal(r[..., :k, :k], dim1=-2, dim2=-1)
        phase = torch.where(d.abs() > 0, d / d.abs(), torch.ones_like(d))
        return (q[..., :k] * phase.unsqueeze(-2), r[..., :k, :] * phase.conj().unsqueeze(-1))
    raise ValueError(kind)


def gauge_free(name: str, actual, expected) -> bool:
    """Whether outputs that differ as they are agree once the decomposition's gauge is removed
    (GAUGE): shapes and dtypes as they are, the rest by _canonical with the dtype's tolerances.
    `actual`/`expected`: the trial's outputs (the op's result, then the arguments it wrote)."""
    import torch

    from jaxdev.audit import check

    kind = GAUGE.get(name.split("::", 1)[-1].split(".")[0])
    if kind is None or check.compare(actual, expected, 0.0, 0.0, values=False) is not None:
        return False
    # the result, and the written arguments (out= variants) when they are the result's tensors
    groups = [(actual[0], expected[0])]
    if len(expected) > 1:
        written = (tuple(actual[1:]), tuple(expected[1:]))
        groups.append(written if kind != "eigvals" else (actual[1], expected[1]))
    try:
        for a, e in groups:
            shaped = isinstance(e, torch.Tensor) if kind == "eigvals" else isinstance(e, (tuple, list)) and len(e) >= 2
            if not shaped:
                return False
            if check.compare(_canonical(kind, a), _canonical(kind, e), 0.0, 0.0) is not None:
                return False
        return True
    except Exception:
        return False


# ---------------------------------------------------------------------------------------------
# One trial (worker side)


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else ''}"


def _outputs(result, kwargs, written):
    """What the op produced: its return value and the arguments it wrote."""
    return [result] + [kwargs[w] for w in written if w in kwargs]


def _prefill_outs(op, kwargs, written, expected) -> None:
    """Size the out= tensors as CPU's results and fill them with a sentinel (NaN, or -77 for
    integers): what the op leaves unwritten then differs from the first run's."""
    import torch

    outs = {a.name for a in op._schema.arguments if _is_out(a)}
    for index, name in enumerate(written):
        given, result = kwargs.get(name), expected[1 + index]
        if name not in outs or not isinstance(given, torch.Tensor) or not isinstance(result, torch.Tensor):
            continue
        given.resize_(result.shape)
        given.fill_(float("nan") if given.dtype.is_floating_point or given.dtype.is_complex else -77)


def _partly_sentinel(x) -> bool:
    """Whether some but not all elements of x hold _prefill_outs' sentinel."""
    import torch

    if not isinstance(x, torch.Tensor) or x.numel() < 2:
        return False
    kept = x.isnan() if x.dtype.is_floating_point or x.dtype.is_complex else x == -77
    return bool(kept.any()) and not bool(kept.all())


def _masked(outputs, unstable: set) -> list:
    """The outputs' leaves with the unstable ones replaced by None (positions kept)."""
    from torch.utils._pytree import tree_flatten

    return [None if i in unstable else x for i, x in enumerate(tree_flatten(outputs)[0])]


# Outputs (positions among the op's flattened outputs: the returned ones, then an out= overload's
# written tensors) that CPU's kernel leaves partly unwritten by design, so their values are compared by
# shape and dtype only: _ctc_loss's log_alpha (returned 1, out= 3) is written only within each
# sample's input and target lengths.
PARTLY_UNWRITTEN: dict[str, tuple[int, ...]] = {"aten::_ctc_loss": (1, 3)}


def _is_uninitialised(op, name: str) -> bool:
    """Allocations whose values are whatever memory held (compared by shape and dtype only)."""

    from jaxdev.audit.check import UNINITIALISED

    base = name.split(".")[0]
    return (
        base in UNINITIALISED
        or "empty" in base.split("::", 1)[1]
        or base in ("aten::new_empty", "aten::_efficientzerotensor", "aten::_make_dep_token")  # empty({})
    )


def trial(name: str, on_phase: Callable[[str], None] = lambda phase: None, donors=()) -> dict:
    """The verdict of one overload tried directly: {status, reason, [category, dtype, repro,
    fallback, max_abs, max_rel, random]}. status is an auditor status (facts.SEVERITY) or
    "untriable" (with a category from UNTRIABLE)."""
    import warnings

    import torch
    from torch.utils._pytree import tree_flatten, tree_map

    import jaxdev
    from jaxdev.audit import calls, check, dispatch, samples

    op = dispatch.overload(name)
    if op is None:
        return {"status": "untriable", "category": "python", "reason": UNTRIABLE["python"]}
    on_phase("cpu")
    chosen = None
    first_error = None
    no_cpu = True  # every candidate: "Could not run ... with arguments from the 'CPU' backend"
    try:
        for plan, build in itertools.chain(donor_candidates(op, donors), candidates(op)):
            try:
                kwargs, written = build("cpu", 0)
                samples.seed_all(0)
                expected = _outputs(op(**kwargs), kwargs, written)
            except _Unbuildable as e:
                return {"status": "untriable", "category": "argument", "reason": f"{UNTRIABLE['argument']}: {e}"}
            except Exception as e:
                first_error = first_error or _short(e)
                no_cpu = no_cpu and "from the 'CPU' backend" in str(e)
                continue
            chosen = plan, build, kwargs, expected, written
            break
    except Exception as e:  # building itself failed in an unforeseen way
        return {"status": "untriable", "category": "argument", "reason": f"building the arguments raised {_short(e)}"}
    if chosen is None and first_error and no_cpu:
        return {
            "status": "untriable",
            "category": "no_cpu_kernel",
            "reason": f"{UNTRIABLE['no_cpu_kernel']}: a kernel it calls has none ({first_error[:200]})",
        }
    if chosen is None:
        reason = UNTRIABLE["no_valid_sample"] + (f" (first: {first_error})" if first_error else "")
        return {"status": "untriable", "category": "no_valid_sample", "reason": reason}
    plan, build, kwargs, expected, written = chosen
    repro = describe(name, plan, kwargs)
    dtypes = [v.dtype for v in tree_flatten(kwargs)[0] if isinstance(v, torch.Tensor)]
    out = {"dtype": samples.dtype_name(dtypes[0]) if dtypes else "float32", "repro": repro}
    if plan[0] == "donor":
        out["donor"] = f"arguments of {plan[1]} in OpInfo {plan[2]}'s sample"
    # Random ops (tagged nondeterministic_seeded) are compared by value only where two more CPU runs
    # under other seeds agree with the first (dropout with p=0, an RNN without dropout): the values
    # then do not depend on the generator. Outputs whose CPU values differ between runs are compared
    # by shape and dtype only (all of them: `random`). One more run gets its out= tensors pre-filled
    # with a sentinel: an output where some (not all) elements keep it was left partly unwritten
    # (uninitialised memory on CPU) and is compared by shape and dtype only too.
    random = _is_uninitialised(op, name) or name in DEVICE_RESULTS
    unstable: set[int] = set()  # leaves (of tree_flatten(outputs)) whose CPU values vary
    seeds = (1, 2) if torch.Tag.nondeterministic_seeded in op.tags else (1,)
    expected_leaves = tree_flatten(expected)[0]
    for seed in () if random else seeds:
        try:
            kwargs2, _ = build("cpu", 0)
            samples.seed_all(seed)
            again = _outputs(op(**kwargs2), kwargs2, written)
            random = check.compare(again, expected, 0.0, 0.0, values=False) is not None
            for i, (x, y) in enumerate(zip(tree_flatten(again)[0], expected_leaves)):
                if check.compare([x], [y], 0.0, 0.0) is not None:
                    unstable.add(i)
        except Exception:
            random = True
        if random:
            break
    if not random and any(_is_out(a) for a in op._schema.arguments):
        with contextlib.suppress(Exception):
            kwargs2, _ = build("cpu", 0)
            _prefill_outs(op, kwargs2, written, expected)
            samples.seed_all(seeds[0])
            again = _outputs(op(**kwargs2), kwargs2, written)
            for i, (x, y) in enumerate(zip(tree_flatten(again)[0], expected_leaves)):
                if _partly_sentinel(x) and check.compare([x], [y], 0.0, 0.0) is not None:
                    unstable.add(i)
    # Outputs CPU leaves partly unwritten by design: two runs may agree by chance (fresh zeroed pages)
    unstable |= set(PARTLY_UNWRITTEN.get(name.split(".")[0], ()))
    tensors = [i for i, x in enumerate(expected_leaves) if isinstance(x, torch.Tensor)]
    if not random and unstable and all(i in unstable for i in tensors):
        random, unstable = True, set()
    if random:
        out["random"] = True
    on_phase("jax")
    jaxdev.reset_fallback_counts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            dev_kwargs, _ = build("jax", 0)
            samples.seed_all(0)
            actual = _outputs(op(**dev_kwargs), dev_kwargs, written)
            layouts = calls.layouts(actual)
            actual = tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, actual)
        except Exception as e:
            status = check._exception_status(e)
            fallback = sorted(jaxdev.fallback_counts())
            if status == "unsupported":
                return {**out, "status": "untriable", "category": "unsupported", "reason": _short(e)}
            return {**out, "status": status, "reason": _short(e), **({"fallback": fallback} if fallback else {})}
    fallback = sorted(jaxdev.fallback_counts())
    if fallback:
        out["fallback"] = fallback
    bad = check.compare(actual, expected, 0.0, 0.0, values=not random)
    if bad and unstable and not random:  # compare the stable outputs' values only
        bad = check.compare(actual, expected, 0.0, 0.0, values=False) or check.compare(
            _masked(actual, unstable), _masked(expected, unstable), 0.0, 0.0
        )
    gauge = ""
    if bad and bad["status"] == "wrong" and gauge_free(name, actual, expected):
        bad, gauge = None, GAUGE_NOTE
    if bad:
        if fallback:
            bad["reason"] += f" (CPU fallback used for {', '.join(fallback)})"
        return {**out, **bad}
    misplaced = check._stride_mismatch(layouts, expected)
    if misplaced:
        return {**out, "status": "stride_mismatch", "reason": misplaced}
    if fallback:
        return {
            **out,
            "status": "fallback",
            "reason": f"correct only through the CPU fallback for {', '.join(fallback)}",
        }
    partly = (
        f"values of output(s) {sorted(unstable)} unchecked: they vary between CPU runs, or CPU leaves them "
        "partly unwritten"
        if unstable
        else ""
    )
    return {
        **out,
        "status": "pass",
        "reason": "values unchecked: random op, uninitialised memory or a device-dependent result"
        if random
        else "; ".join(x for x in (gauge, partly) if x),
    }


# ---------------------------------------------------------------------------------------------
# Worker processes (parent side)


class _Worker(runner.WorkerProcess):
    module = "jaxdev.audit.schema_samples"

    def __init__(self, env: dict):
        super().__init__(env)
        self.name: str | None = None
        self.phase = "cpu"


def _lost(phase: str, status: str, reason: str) -> dict:
    if phase == "cpu":
        return {"status": "untriable", "category": "cpu_crash", "reason": f"{UNTRIABLE['cpu_crash']}: {reason}"}
    return {"status": status, "reason": reason}


def run_trials(
    names: list[str],
    *,
    jobs: int = 1,
    timeout: float = DEFAULT_TIMEOUT_S,
    on_result: Callable[[str, dict], None],
    env: dict | None = None,
    cache_dir: str | None = None,
    donors: dict | None = None,
) -> None:
    """Try each overload in worker processes; `on_result(name, verdict)` as each finishes.
    `donors`: overload -> [(sibling overload, OpInfo reaching it)] (see donor_candidates)."""
    from jaxdev.audit import AuditError

    env = runner.worker_env(env, cache_dir)
    queue = deque(names)
    workers: list[_Worker] = []
    failed_starts = 0  # in a row: a worker that cannot import jaxdev at all is an error, once is a hiccup

    def start_failed(w: _Worker, why: str) -> None:
        nonlocal failed_starts
        w.kill()
        workers.remove(w)
        failed_starts += 1
        if failed_starts >= MAX_FAILED_STARTS:
            raise AuditError(f"a trial worker failed to start {failed_starts} times in a row ({why})")

    try:
        while queue or any(w.name for w in workers):
            while len(workers) < jobs and len(workers) < len(queue) + sum(1 for w in workers if w.name):
                workers.append(_Worker(env))
            if not workers:
                break
            ready = wait(
                [w.recv for w in workers], timeout=max(0.05, min(w.deadline for w in workers) - time.monotonic())
            )
            now = time.monotonic()
            for w in list(workers):
                if w.recv in ready:
                    try:
                        msg = w.recv.recv()
                    except (EOFError, OSError):
                        if not w.ready:
                            start_failed(w, w.died_how())
                            continue
                        if w.name:
                            on_result(w.name, _lost(w.phase, "crash", w.died_how()))
                        w.kill()
                        workers.remove(w)
                        continue
                    w.deadline = now + timeout
                    if msg[0] == "ready":
                        w.ready, failed_starts = True, 0
                    elif msg[0] == "phase":
                        w.phase = msg[1]
                        continue
                    elif msg[0] == "result":
                        on_result(w.name, msg[1])
                    w.name = None
                    if queue:
                        w.name, w.phase = queue.popleft(), "cpu"
                        w.send.send(("trial", w.name, (donors or {}).get(w.name, ())))
                        w.deadline = now + timeout
                    else:
                        w.send.send(("stop",))
                        w.kill()
                        workers.remove(w)
                elif now > w.deadline:
                    if not w.ready:
                        start_failed(w, f"no answer within {runner.STARTUP_TIMEOUT_S:g} s")
                        continue
                    on_result(w.name, _lost(w.phase, "timeout", f"no answer within {timeout:g} s ({w.phase})"))
                    w.kill()
                    workers.remove(w)
    finally:
        for w in workers:
            w.kill()


def _worker_main(fd_in: int, fd_out: int) -> None:
    recv, send = runner.worker_connections(fd_in, fd_out)
    import jaxdev  # noqa: F401
    from jaxdev.audit import samples

    if os.environ.get(samples.PLUGINS_ENV):
        samples.op_db()  # plugins define their ops (once: op_db is cached)
    send.send(("ready",))
    while True:
        try:
            msg = recv.recv()
        except EOFError:
            return
        if msg[0] == "stop":
            return
        name, donors = msg[1], msg[2]
        try:
            verdict = trial(name, lambda phase: send.send(("phase", phase)), donors)
        except Exception as e:  # an auditor bug on an odd overload must not stop the run
            verdict = {"status": "exception", "reason": f"auditor: {_short(e)}"}
        send.send(("result", verdict))


if __name__ == "__main__":
    _worker_main(int(sys.argv[1]), int(sys.argv[2]))
