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
nothing about jax.

Judging reuses the auditor's rules (check.py): `compare` for values, dtypes and shapes (the
dtype's assert_close tolerances), `_stride_mismatch`, `_exception_status` for a raise on jax, and
the fallback counter. The result is the op's return value plus every argument the schema marks as
written (in-place self, out=). Random ops (tagged nondeterministic_seeded), allocations of
uninitialised memory (empty*) and ops whose CPU results differ between two runs are compared by
shape and dtype only.

Trials run in worker processes (`python -m jaxdev.audit.schema_samples IN_FD OUT_FD`), one
overload at a time with a time limit: a crash or a hang costs that overload, not the run. The
worker says which phase it is in (cpu: searching a candidate; jax: running it) so the parent can
tell a CPU kernel that crashed (untriable) from a jax one (fails, crash/timeout).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection, wait

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
}

SHAPES = ((3, 3), (2, 3, 3), (5,), (), (2, 3, 4, 4), (2, 3, 4), (1, 2, 3, 4, 4), (4, 1))
DTYPE_NAMES = ("float32", "int64", "bool", "complex64", "float64")
INDEX_NAMES = frozenset(
    {"index", "indices", "idx", "offsets", "lengths", "batch_sizes", "indices_or_sections", "crow_indices"}
)
MAX_CANDIDATES = 1000  # CPU attempts per overload before giving up (each costs microseconds to milliseconds)
DEFAULT_TIMEOUT_S = 30.0
STARTUP_TIMEOUT_S = 180.0
MAX_FAILED_STARTS = 3

_SPARSE_WORDS = ("sparse", "_csr", "_csc", "_bsr", "_bsc", "coo", "_nnz", "coalesce", "crow_", "ccol_")
_SPARSE_NAMES = frozenset(
    {"indices", "values", "_indices", "_values", "col_indices", "row_indices", "dense_dim", "sparse_dim", "_to_dense"}
)
# Arguments PyTorch requires on CPU whatever the op's device (like facts.CPU_ARGS for OpInfos).
CPU_ARGS = {"aten::tensor_split": ("tensor_indices_or_sections",), "aten::randint_like": ("high",)}
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
    schema = str(op._schema)
    quant_name = ("quantize" in base and "fake_quantize" not in base) or base.startswith(("q_", "_make_per_"))
    if quant_name or base in ("int_repr", "qscheme") or (has("QuantizedCPU") and not dense) or "QScheme" in schema:
        return "quantized", UNTRIABLE["quantized"] + f" ({base})"
    if not dense:
        keys = [k for k in ("CUDA", "MPS", "MkldnnCPU", "XPU", "Meta") if has(k)]
        return "no_cpu_kernel", UNTRIABLE["no_cpu_kernel"] + (f": {', '.join(keys)}" if keys else "")
    for a in op._schema.arguments:
        t = str(a.real_type)
        if any(u in t for u in _UNBUILDABLE):
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
    count = 0
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


def _builder(op, shape, dtype, out_plan, fill: int = 0, zero_d: bool = False, given: dict | None = None):
    """`given`: argument values taken from a captured call (OpInfo donors): used as they are."""
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
        outs = iter(out_plan)

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
                d = next(outs, None)
                out_dtype = dtype if d is None else getattr(torch, d)
                empty = torch.empty(0, dtype=out_dtype, device=device)
                kwargs[name] = (
                    [empty, torch.empty(0, dtype=out_dtype, device=device)] if t.startswith("List") else empty
                )
                continue
            if given is not None and name in given:
                kwargs[name] = _to(given[name], device)
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
        return kwargs, written

    return build


def _to(value, device: str):
    """A captured argument for `device`: tensors copied there (fresh copies: ops write into them)."""
    import torch
    from torch.utils._pytree import tree_map

    def move(x):
        if isinstance(x, torch.Tensor):
            return x.detach().clone().to(device)
        if isinstance(x, torch.device):
            return torch.device(device)
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
        for d in (None, "int64", "bool", "float32"):
            plan = ("donor", target, opinfo, d)
            outs = tuple(d for a in op._schema.arguments if _is_out(a))
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
        return repr(v)

    return f"{name}(" + ", ".join(f"{k}={show(v)}" for k, v in kwargs.items()) + ")"


# ---------------------------------------------------------------------------------------------
# One trial (worker side)


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else ''}"


def _outputs(result, kwargs, written):
    """What the op produced: its return value and the arguments it wrote."""
    return [result] + [kwargs[w] for w in written if w in kwargs]


def _is_random(op, name: str) -> bool:
    import torch

    from jaxdev.audit.check import UNINITIALISED

    base = name.split(".")[0]
    return (
        torch.Tag.nondeterministic_seeded in op.tags
        or base in UNINITIALISED
        or "empty" in base.split("::", 1)[1]
        or base in ("aten::new_empty", "aten::_efficientzerotensor")
    )


def trial(name: str, on_phase: Callable[[str], None] = lambda phase: None, donors=()) -> dict:
    """The verdict of one overload tried directly: {status, reason, [category, dtype, repro,
    fallback, max_abs, max_rel, random]}. status is an auditor status (facts.SEVERITY) or
    "untriable" (with a category from UNTRIABLE)."""
    import warnings

    import torch
    from torch.utils._pytree import tree_flatten, tree_map

    import jaxdev
    from jaxdev.audit import check, dispatch, samples

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
    random = _is_random(op, name) or name in DEVICE_RESULTS
    if not random:
        try:
            kwargs2, _ = build("cpu", 0)
            samples.seed_all(1)
            again = _outputs(op(**kwargs2), kwargs2, written)
            random = check.compare(again, expected, 0.0, 0.0) is not None
        except Exception:
            random = True
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
            layouts = check._layouts(actual)
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
    return {
        **out,
        "status": "pass",
        "reason": "values unchecked: random op, uninitialised memory or a device-dependent result" if random else "",
    }


# ---------------------------------------------------------------------------------------------
# Worker processes (parent side)


class _Worker:
    def __init__(self, env: dict):
        parent_in, child_out = os.pipe()
        child_in, parent_out = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jaxdev.audit.schema_samples", str(child_in), str(child_out)],
            pass_fds=(child_in, child_out),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(child_in)
        os.close(child_out)
        self.recv = Connection(parent_in, writable=False)
        self.send = Connection(parent_out, readable=False)
        self.ready = False
        self.name: str | None = None
        self.phase = "cpu"
        self.deadline = time.monotonic() + STARTUP_TIMEOUT_S

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.recv.close()
        self.send.close()

    def died_how(self) -> str:
        rc = self.proc.wait()
        return f"worker killed by signal {signal.Signals(-rc).name}" if rc < 0 else f"worker exited with code {rc}"


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
    from jaxdev.audit import AuditError, runner

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
                        start_failed(w, f"no answer within {STARTUP_TIMEOUT_S:g} s")
                        continue
                    on_result(w.name, _lost(w.phase, "timeout", f"no answer within {timeout:g} s ({w.phase})"))
                    w.kill()
                    workers.remove(w)
    finally:
        for w in workers:
            w.kill()


def _worker_main(fd_in: int, fd_out: int) -> None:
    recv = Connection(fd_in, writable=False)
    send = Connection(fd_out, readable=False)
    import jax

    from jaxdev.audit import runner

    jax.config.update("jax_compilation_cache_dir", os.environ.get(runner.CACHE_ENV, runner.CACHE_DIR))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    runner._share_mlir_context()
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
