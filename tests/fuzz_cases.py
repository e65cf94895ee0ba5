"""Hostile-input fuzz cases for tests/test_fuzz_hostile.py (issue 14, item 5): what a case is, how it is
judged, and the corpus as data (tests/data/fuzz_corpus.json); how each op is called: tests/fuzz_calls.py.

A case is one call of one of ~50 ops with random and extreme arguments: shapes with 0, 1, negative
and overflowing sizes, strides (zero, negative, overlapping `as_strided` views, huge), every dtype,
Python scalars against tensors, a CPU tensor among jax ones, wrong `out=` tensors, bad dims and bad
indices. The cases the tests run are data: `load_corpus()` reads them from tests/data/fuzz_corpus.json
(case `index` of the corpus's seed, and the known differences). tests/fuzz_draw.py draws them
(`make_case(seed, index)`, a pure function of its arguments) and writes the corpus.

`check_case(case)` runs the call on CPU and on jax (inputs are built on CPU from their own seeds, moved
with `.to("jax")`, then given the same view on each device) and judges the jax run against CPU's:

* CPU raises: jax raises an instance of the same exception class (the messages' similarity is
  recorded, not required);
* CPU succeeds: jax succeeds with the same values (NaN positions included), dtype and shape, the
  same strides and storage offset for views, and leaves the inputs as CPU leaves them;
* a CPU tensor among jax ones (a mixed-device case): jax may also raise PyTorch's "same device"
  RuntimeError, as CUDA does; if it succeeds, it must match CPU.

Rerun one case, or a long run: `.venv/bin/python tests/fuzz_draw.py SEED [INDEX] [--cases 5000]`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import math
import warnings
from pathlib import Path

import torch
from fuzz_calls import CALL, FLAGS
from jaxdev_testing import ALL_DTYPES, CPU, JAX

from jaxdev.audit.check import compare

DTYPES = ALL_DTYPES
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
# A tensor output of more elements than this (an expanded view of 2**62 elements) is compared by its
# metadata only: reading its values would allocate them.
MAX_COMPARED = 1 << 16
BIG = 1 << 31  # a case with an integer at least this large runs in a child process


class _Device:
    """Stands for the device of the run in a case's arguments (factories' `device=`)."""

    def __repr__(self):
        return "DEVICE"


DEVICE = _Device()


@dataclasses.dataclass(frozen=True)
class T:
    """A tensor argument: `shape` values of `dtype` made on CPU from `seed`, moved to the run's
    device (unless `cpu`: it stays on CPU, a mixed-device case), then given `view`.

    kind: "rand" (random values, specials among floats), "index" (integers in [lo, hi)).
    view: () | ("t",) | ("step",) every other element of dim 0 | ("as_strided", size, stride, offset) on
    the flattened values | ("expand", sizes)."""

    shape: tuple
    dtype: torch.dtype = torch.float32
    seed: int = 0
    kind: str = "rand"
    lo: int = 0
    hi: int = 0
    view: tuple = ()
    cpu: bool = False

    def __repr__(self):
        parts = [repr(self.shape), str(self.dtype).replace("torch.", "")]
        if self.kind == "index":
            parts.append(f"[{self.lo},{self.hi})")
        if self.view:
            parts.append(f"view={self.view}")
        if self.cpu:
            parts.append("cpu")
        return f"T({', '.join(parts)}, s{self.seed})"

    def values(self) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.seed)
        shape = self.shape
        if self.kind == "index":
            return torch.randint(self.lo, self.hi, shape, generator=gen).to(self.dtype)
        if self.dtype == torch.bool:
            return torch.rand(shape, generator=gen) < 0.5
        if not (self.dtype.is_floating_point or self.dtype.is_complex):
            info = torch.iinfo(self.dtype)
            lo, hi = max(info.min, -100), min(info.max, 100)
            return torch.randint(lo, hi + 1, shape, generator=gen).to(self.dtype)
        x = torch.randn(shape, generator=gen, dtype=torch.float64) * 3
        if self.dtype.is_complex:
            x = torch.complex(x, torch.randn(shape, generator=gen, dtype=torch.float64))
        flat = x.reshape(-1)
        n = flat.numel()
        if n:
            specials = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e30]
            picks = torch.randint(0, n, (max(1, n // 5),), generator=gen).tolist()
            which = torch.randint(0, len(specials), (len(picks),), generator=gen).tolist()
            for p, w in zip(picks, which):
                flat[p] = specials[w]
        return x.to(self.dtype)

    def build(self, device) -> torch.Tensor:
        x = self.values()
        if not self.cpu:
            x = x.to(device)
        v = self.view
        if not v:
            return x
        if v[0] == "t":
            return x.t() if x.dim() == 2 else x.transpose(0, -1)
        if v[0] == "step":
            return x[::2]
        if v[0] == "as_strided":
            return x.reshape(-1).as_strided(v[1], v[2], v[3])
        if v[0] == "expand":
            return x.expand(v[1])
        raise ValueError(v)


@dataclasses.dataclass
class Case:
    seed: int
    index: int
    op: str
    args: tuple
    kwargs: dict

    def __str__(self):
        items = [_show(a) for a in self.args] + [f"{k}={_show(v)}" for k, v in self.kwargs.items()]
        return f"{self.op}({', '.join(items)})"

    def repro(self) -> str:
        return f"tests/fuzz_draw.py {self.seed} {self.index}  # {self}"

    @property
    def mixed(self) -> bool:
        return any(isinstance(x, T) and x.cpu for x in _leaves((self.args, self.kwargs)))

    @property
    def risky(self) -> bool:
        """Sizes past int32 (allocations that must fail cleanly): run in a child process."""
        for x in _leaves((self.args, self.kwargs)):
            if isinstance(x, T):
                x = (x.shape, x.view)
            if any(isinstance(n, int) and not isinstance(n, bool) and abs(n) >= BIG for n in _ints(x)):
                return True
            if isinstance(x, float) and math.isfinite(x) and abs(x) >= BIG:
                return True
        return False


def _show(x) -> str:
    if isinstance(x, torch.dtype):
        return str(x).replace("torch.", "")
    if isinstance(x, float) and not math.isfinite(x):
        return f"float('{x}')"
    if isinstance(x, list):
        return "[" + ", ".join(_show(a) for a in x) + "]"
    if isinstance(x, tuple):
        return "(" + ", ".join(_show(a) for a in x) + ("," if len(x) == 1 else "") + ")"
    return repr(x)


def _leaves(x):
    if isinstance(x, (list, tuple)):
        for a in x:
            yield from _leaves(a)
    elif isinstance(x, dict):
        for a in x.values():
            yield from _leaves(a)
    else:
        yield x


def _ints(x):
    if isinstance(x, (list, tuple)):
        for a in x:
            yield from _ints(a)
    elif isinstance(x, int):
        yield x


def materialize(x, device):
    if isinstance(x, T):
        return x.build(device)
    if x is DEVICE:
        return device
    if isinstance(x, list):
        return [materialize(a, device) for a in x]
    if isinstance(x, tuple):
        return tuple(materialize(a, device) for a in x)
    if isinstance(x, dict):
        return {k: materialize(v, device) for k, v in x.items()}
    return x


# --- the corpus as data -----------------------------------------------------------------------------
# JSON keeps lists, strings, bools, ints and finite floats; the rest is tagged: {"tuple": [...]},
# {"float": "nan"}, {"complex": [re, im]}, {"dtype": "float32"}, {"device": "DEVICE"}, {"dict": {...}},
# {"T": {"shape": [...], "dtype": name, and the fields that differ from T's defaults}}.

CORPUS = Path(__file__).parent / "data" / "fuzz_corpus.json"
_T_DEFAULTS = {f.name: f.default for f in dataclasses.fields(T)}


def to_data(x):
    if isinstance(x, T):  # shape a list and dtype a name; the other fields where they differ from T's defaults
        fields = {"shape": list(x.shape), "dtype": str(x.dtype).replace("torch.", "")}
        fields.update(
            (k, to_data(getattr(x, k))) for k, v in _T_DEFAULTS.items() if k not in fields and getattr(x, k) != v
        )
        return {"T": fields}
    if x is DEVICE:
        return {"device": "DEVICE"}
    if isinstance(x, torch.dtype):
        return {"dtype": str(x).replace("torch.", "")}
    if isinstance(x, tuple):
        return {"tuple": [to_data(a) for a in x]}
    if isinstance(x, list):
        return [to_data(a) for a in x]
    if isinstance(x, dict):
        return {"dict": {k: to_data(v) for k, v in x.items()}}
    if isinstance(x, complex):
        return {"complex": [to_data(x.real), to_data(x.imag)]}
    if isinstance(x, float) and not math.isfinite(x):
        return {"float": repr(x)}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise TypeError(f"a fuzz case argument of type {type(x).__name__} has no data form")


def from_data(d):
    if isinstance(d, list):
        return [from_data(a) for a in d]
    if not isinstance(d, dict):
        return d
    ((tag, v),) = d.items()
    if tag == "T":
        fields = {k: from_data(a) for k, a in v.items()}
        return T(**{**fields, "shape": tuple(v["shape"]), "dtype": getattr(torch, v["dtype"])})
    if tag == "device":
        return DEVICE
    if tag == "dtype":
        return getattr(torch, v)
    if tag == "tuple":
        return tuple(from_data(a) for a in v)
    if tag == "dict":
        return {k: from_data(a) for k, a in v.items()}
    if tag == "complex":
        return complex(from_data(v[0]), from_data(v[1]))
    if tag == "float":
        return float(v)
    raise ValueError(f"unknown tag {tag!r} in a fuzz case")


def case_to_data(case: Case) -> dict:
    kwargs = {k: to_data(v) for k, v in case.kwargs.items()}
    return {"seed": case.seed, "index": case.index, "op": case.op, "args": to_data(case.args), "kwargs": kwargs}


def case_from_data(d: dict) -> Case:
    kwargs = {k: from_data(v) for k, v in d["kwargs"].items()}
    return Case(d["seed"], d["index"], d["op"], from_data(d["args"]), kwargs)


@dataclasses.dataclass
class Corpus:
    seed: int
    cases: list[Case]  # cases[i] is case i of the seed
    known: dict[str, Case]  # name -> a case of a known difference (tests/test_fuzz_hostile.py's KNOWN)


def load_corpus(path=CORPUS) -> Corpus:
    data = json.loads(Path(path).read_text())
    cases = [case_from_data(d) for d in data["cases"]]
    assert [c.index for c in cases] == list(range(len(cases))), "the corpus holds cases 0, 1, 2, ... of its seed"
    return Corpus(data["seed"], cases, {k: case_from_data(v) for k, v in data["known"].items()})


def write_corpus(corpus: Corpus, path=CORPUS) -> None:
    """One case a line, so that a diff of the corpus shows the cases that changed."""

    def line(case):
        return json.dumps(case_to_data(case), separators=(", ", ": "))

    cases = ",\n".join("    " + line(c) for c in corpus.cases)
    known = ",\n".join(f"    {json.dumps(k)}: {line(c)}" for k, c in corpus.known.items())
    text = f'{{\n  "seed": {corpus.seed},\n  "cases": [\n{cases}\n  ],\n  "known": {{\n{known}\n  }}\n}}\n'
    Path(path).write_text(text)


# --- running and judging -----------------------------------------------------------------------


@dataclasses.dataclass
class Verdict:
    ok: bool
    reason: str = ""
    cpu_error: str = ""
    jax_error: str = ""
    similarity: float | None = None  # of the error messages, when both raised


def _error_text(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0][:240] if lines else ''}"


def run(case: Case, device):
    """(outputs, tensor inputs after the call) or the exception raised."""
    args = materialize(case.args, device)
    kwargs = materialize(case.kwargs, device)
    out = CALL[case.op](*args, **kwargs)
    inputs = [x for x in _leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
    return out, inputs


def _tensor_diff(a: torch.Tensor, e: torch.Tensor, where: str, strides: bool, values: bool, on_jax: bool) -> str | None:
    if on_jax and a.device.type != "jax":
        return f"{where} is on {a.device}, not on jax"
    if a.dtype != e.dtype:
        return f"{where} dtype {a.dtype}, CPU gives {e.dtype}"
    if a.shape != e.shape:
        return f"{where} shape {list(a.shape)}, CPU gives {list(e.shape)}"
    if strides and (a.stride() != e.stride() or a.storage_offset() != e.storage_offset()):
        return f"{where} strides {a.stride()}+{a.storage_offset()}, CPU gives {e.stride()}+{e.storage_offset()}"
    if not values or e.numel() > MAX_COMPARED:
        return None
    a, e = a.detach().cpu(), e.detach()
    if e.dtype.is_complex:  # part by part: |(inf+xj) - (inf+yj)| is NaN however close x and y are
        a, e = torch.view_as_real(a.resolve_conj()), torch.view_as_real(e.resolve_conj())
    bad = compare(a, e, 0.0, 0.0, floor=e.dtype.is_floating_point)
    return f"{where}: {bad['reason']}" if bad else None


def _diff(a, e, where, strides, values, on_jax) -> str | None:
    if isinstance(e, torch.Tensor):
        if not isinstance(a, torch.Tensor):
            return f"{where} is {type(a).__name__}, CPU gives a tensor"
        return _tensor_diff(a, e, where, strides, values, on_jax)
    if isinstance(e, (list, tuple)):
        if not isinstance(a, (list, tuple)) or len(a) != len(e):
            return f"{where}: {len(e)} values on CPU, jax gives {a!r:.100}"
        for i, (x, y) in enumerate(zip(a, e)):
            bad = _diff(x, y, f"{where}.{i}", strides, values, on_jax)
            if bad:
                return bad
        return None
    if a != e and not (isinstance(e, float) and math.isnan(e) and isinstance(a, float) and math.isnan(a)):
        return f"{where} is {a!r}, CPU gives {e!r}"
    return None


def _same_device_error(e: BaseException) -> bool:
    return isinstance(e, RuntimeError) and "device" in str(e)


def check_case(case: Case) -> Verdict:
    with warnings.catch_warnings():  # resized out= tensors, fallbacks: the verdict says what matters
        warnings.simplefilter("ignore")
        return _check_case(case)


def _check_case(case: Case) -> Verdict:
    flags = FLAGS.get(case.op, set())
    try:
        cpu_out, cpu_inputs = run(case, CPU)
    except Exception as e:
        cpu_err = e
    else:
        cpu_err = None
    try:
        jax_out, jax_inputs = run(case, JAX)
        # an error that depends on values raises at the op in per-op mode, at the next sync in fused
        # mode (README, "Eager modes"): CPU's exception either way
        torch.jax.synchronize()
    except Exception as e:
        jax_err = e
        with contextlib.suppress(Exception):  # what the case left pending fails with it, not with the next case
            torch.jax.synchronize()
    else:
        jax_err = None
    if cpu_err is not None:
        if jax_err is None:
            return Verdict(False, f"CPU raised {_error_text(cpu_err)}; jax raised nothing", _error_text(cpu_err))
        sim = difflib.SequenceMatcher(None, str(cpu_err), str(jax_err)).ratio()
        v = Verdict(True, "", _error_text(cpu_err), _error_text(jax_err), sim)
        if not isinstance(jax_err, type(cpu_err)) and not (case.mixed and _same_device_error(jax_err)):
            v.ok = False
            v.reason = f"CPU raised {v.cpu_error}; jax raised {v.jax_error}"
        return v
    if jax_err is not None:
        if case.mixed and _same_device_error(jax_err):
            return Verdict(True, "", "", _error_text(jax_err))
        return Verdict(False, f"CPU succeeded; jax raised {_error_text(jax_err)}", "", _error_text(jax_err))
    values = "values=False" not in flags
    bad = _diff(jax_out, cpu_out, "output", "view" in flags, values, not case.mixed)
    if bad is None and len(jax_inputs) == len(cpu_inputs):
        for i, (a, e) in enumerate(zip(jax_inputs, cpu_inputs)):
            bad = _tensor_diff(a, e, f"input {i} after the call", False, values, False)
            if bad:
                break
    return Verdict(bad is None, bad or "")
