"""Run one OpInfo sample on CPU and on `jax`, and classify what the device did (the statuses and
their order are in facts.py). Directions: forward and backward run the op eagerly; compile runs the
forward through `torch.compile(backend="jax", fullgraph=True)`; fused runs it in fused eager mode
(calls.py), and is judged as forward is.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import torch
from torch.testing._comparison import default_tolerances
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map

import jaxdev
from jaxdev.audit import calls
from jaxdev.audit import samples as sample_db
from jaxdev.audit.calls import Uncapturable, layouts, short, to_cpu
from jaxdev.audit.facts import (
    ARBITRATED_DTYPES,
    ARBITRATION_CPU_BOUND,
    DTYPE_DEPENDENT,
    NOT_ARBITRATED,
    TIED_INDICES,
    TiedIndices,
)
from jaxdev.tensor import is_non_overlapping_and_dense

# Allocations whose values are whatever was in memory (any overload): a sample that reaches only
# these is compared by shape and dtype, like a random op.
UNINITIALISED = frozenset(
    {
        "aten::empty",
        "aten::empty_like",
        "aten::empty_strided",
        "aten::empty_permuted",
        "aten::new_empty",
        "aten::new_empty_strided",
    }
)

_LOST_AUTOGRAD_TEXT = ("an autograd kernel was not registered", "does not require grad and does not have a grad_fn")


class Trace(TorchDispatchMode):
    """Records the aten overloads a call reaches after CompositeImplicitAutograd decomposition."""

    def __init__(self):
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func.name())
        return func(*args, **(kwargs or {}))


def _call(op, sample, backward: bool, grad_outputs=None):
    """Forward: the op's outputs. Backward: (grads w.r.t. differentiable inputs, the seeds used)."""
    out = op(sample.input, *sample.args, **sample.kwargs)
    if not backward:
        return out, None
    out = sample.output_process_fn_grad(out)
    outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    inputs = [
        t
        for t in tree_flatten((sample.input, sample.args, sample.kwargs))[0]
        if isinstance(t, torch.Tensor) and t.requires_grad
    ]
    if grad_outputs is None:
        with _disable_current_modes():  # the seeds are ours, not the op's: keep them out of the trace
            gen = torch.Generator().manual_seed(0)
            grad_outputs = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in outs]
        device_seeds = grad_outputs
    else:
        device_seeds = [g.to(outs[0].device) for g in grad_outputs] if outs else []
        if len(outs) != len(grad_outputs):
            raise _LostAutograd(
                f"{len(grad_outputs) - len(outs)} of {len(grad_outputs)} outputs have no grad_fn on jax"
            )
    if not outs:
        return None, grad_outputs
    grads = torch.autograd.grad(outs, inputs, device_seeds, allow_unused=True)
    return grads, grad_outputs


class _LostAutograd(Exception):
    pass


def _errors(actual: torch.Tensor, expected: torch.Tensor) -> tuple[float, float]:
    wide = torch.complex128 if (actual.is_complex() or expected.is_complex()) else torch.float64
    a, e = actual.detach().to(wide), expected.detach().to(wide)
    same = (a == e) | (torch.isnan(a) & torch.isnan(e)) if not a.is_complex() else (a == e)
    diff = torch.where(same, torch.zeros((), dtype=torch.float64), (a - e).abs().to(torch.float64))
    if diff.numel() == 0:
        return 0.0, 0.0
    scale = e.abs().to(torch.float64)
    rel = torch.where(scale > 0, diff / scale.clamp_min(1e-300), torch.zeros((), dtype=torch.float64))
    return float(diff.max()), float(rel.max())


def compare(actual, expected, atol: float, rtol: float, values: bool = True, floor: bool = True) -> dict | None:
    """None if the outputs (CPU tensors, or nests of them) agree; else {status, reason, max_abs,
    max_rel}. The one jax-vs-CPU comparison: the auditor and the tests both judge with it.
    `floor`: a tolerance never below assert_close's default for the output's dtype (the auditor's
    rule); tests that demand exactness pass False."""
    a_leaves, _ = tree_flatten(actual)
    e_leaves, _ = tree_flatten(expected)
    if len(a_leaves) != len(e_leaves):
        return {"status": "shape_mismatch", "reason": f"{len(a_leaves)} outputs, CPU gives {len(e_leaves)}"}
    worst_abs = worst_rel = 0.0
    bad = None
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        where = f"output {i}" if len(e_leaves) > 1 else "output"
        if isinstance(e, torch.Tensor) != isinstance(a, torch.Tensor):
            return {
                "status": "shape_mismatch",
                "reason": f"{where} is {type(a).__name__}, CPU gives {type(e).__name__}",
            }
        if not isinstance(e, torch.Tensor):
            if values and not (
                a == e
                or (
                    isinstance(a, float)
                    and isinstance(e, float)
                    and (math.isclose(a, e, rel_tol=rtol, abs_tol=atol) or (math.isnan(a) and math.isnan(e)))
                )
            ):
                bad = bad or {"status": "wrong", "reason": f"{where} is {a!r}, CPU gives {e!r}"}
            continue
        if tuple(a.shape) != tuple(e.shape):
            return {"status": "shape_mismatch", "reason": f"{where} shape {list(a.shape)}, CPU gives {list(e.shape)}"}
        if a.dtype != e.dtype:
            return {
                "status": "dtype_mismatch",
                "reason": f"{where} dtype {sample_db.dtype_name(a.dtype)}, CPU gives {sample_db.dtype_name(e.dtype)}",
            }
        if not values:
            continue
        # The unit's tolerance is for its input dtype; an output of another dtype (fft of int64 is
        # complex) gets at least assert_close's default for its own.
        out_rtol, out_atol = default_tolerances(e) if floor else (0.0, 0.0)
        out_atol, out_rtol = max(atol, out_atol), max(rtol, out_rtol)
        try:
            torch.testing.assert_close(
                a,
                e,
                atol=out_atol,
                rtol=out_rtol,
                equal_nan=True,
                check_device=False,
                check_stride=False,
                check_layout=False,
            )
        except AssertionError:
            abs_err, rel_err = _errors(a, e)
            worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
            bad = bad or {"status": "wrong", "reason": f"{where} differs (atol {out_atol:g}, rtol {out_rtol:g})"}
    if bad and bad["status"] == "wrong" and (worst_abs or worst_rel):
        bad.update(max_abs=worst_abs, max_rel=worst_rel)
        bad["reason"] += f": max abs err {worst_abs:.3g}, max rel err {worst_rel:.3g}"
    return bad


def _arg(sample, position: int | None, name: str, default):
    """An argument of the sample by keyword, else by position among the args, else the default."""
    if name in sample.kwargs:
        return sample.kwargs[name]
    if position is not None and len(sample.args) > position:
        return sample.args[position]
    return default


def _bit_equal(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise: the same value with the same sign bit, or both NaN."""
    if a.is_floating_point():
        return ((a == b) & (torch.signbit(a) == torch.signbit(b))) | (torch.isnan(a) & torch.isnan(b))
    return a == b


def arrangement_problem(rule: TiedIndices, sample, indices, values, cpu_indices) -> str | None:
    """None when `indices` (from the device) are a valid arrangement of the CPU input `sample.input`
    under `rule`; else what is wrong with them. `values`: the device's values output (None for
    argsort: the input gathered at CPU's indices is the reference)."""
    x = sample.input.detach()
    dim = _arg(sample, rule.dim, "dim", rule.default_dim)
    keepdim = bool(_arg(sample, rule.keepdim, "keepdim", False)) if rule.keepdim is not None else True
    if x.dim() == 0:  # a 0-d input: one element, and its only index is 0
        x, d = x.reshape(1), 0
        reshape = lambda t: t.reshape(1)
    else:
        d = dim % x.dim()
        reshape = (lambda t: t.unsqueeze(d)) if rule.reduces and not keepdim else (lambda t: t)
    idx = reshape(indices)
    n = x.shape[d]
    if idx.numel() and not bool(((idx >= 0) & (idx < n)).all()):
        return f"are out of range for dim {d} of size {n}: {idx.min().item()}..{idx.max().item()}"
    gathered = x.gather(d, idx)
    reference = reshape(values) if values is not None else x.gather(d, reshape(cpu_indices))
    mismatch = ~_bit_equal(gathered, reference)
    if bool(mismatch.any()):
        what = "the returned values" if values is not None else "the input at CPU's indices"
        return f"do not pick {what}: {int(mismatch.sum())} of {mismatch.numel()} positions gather another value"
    if rule.permutation:
        shape = [1] * idx.dim()
        shape[d] = n
        if not bool((idx.sort(dim=d).values == torch.arange(n).view(shape)).all()):
            return f"are not a permutation along dim {d}"
    return None


def _by_value_then_grad(x: torch.Tensor, grad: torch.Tensor, d: int) -> torch.Tensor:
    """`grad` reordered in each slice along `d`: by x's value, ties by the gradient itself (stable
    sorts; tied values, -0.0 and 0.0, or NaNs, end up adjacent), as rows."""
    n = x.shape[d]
    keys = x.movedim(d, -1).reshape(-1, n)
    g = grad.movedim(d, -1).reshape(-1, n)
    by_grad = g.sort(dim=-1, stable=True).indices
    by_value = keys.gather(-1, by_grad).sort(dim=-1, stable=True).indices
    return g.gather(-1, by_grad.gather(-1, by_value))


def compare_tied_grads(rule: TiedIndices, sample, actual, expected, atol: float, rtol: float) -> dict | None:
    """compare() for gradients of an op in facts.TIED_INDICES: as CPU's, or as CPU's up to a
    reordering within each group of tied input elements along the dim."""
    bad = compare(actual, expected, atol, rtol)
    dim = _arg(sample, rule.dim, "dim", rule.default_dim)
    if not bad or bad["status"] != "wrong" or sample.kwargs.get("stable") is True or dim is None:
        return bad
    x = sample.input.detach()
    a_leaves, e_leaves = tree_flatten(actual)[0], tree_flatten(expected)[0]
    if x.dim() == 0 or len(e_leaves) != 1 or not isinstance(a_leaves[0], torch.Tensor):
        return bad
    a, e = a_leaves[0], e_leaves[0]
    if a.shape != x.shape or e.shape != x.shape or x.is_complex():
        return bad
    d = dim % x.dim()
    regrouped = compare(_by_value_then_grad(x, a, d), _by_value_then_grad(x, e, d), atol, rtol)
    if regrouped:
        regrouped["reason"] += " (also after reordering within tied elements)"
    return regrouped


def compare_tied(rule: TiedIndices, sample, actual, expected, atol: float, rtol: float) -> dict | None:
    """compare() for an op in facts.TIED_INDICES: the outputs other than the indices as usual; the
    indices as CPU's, or any valid arrangement of tied elements (arrangement_problem). With
    stable=True (a specified order) everything is compared as usual."""
    a_leaves, _ = tree_flatten(actual)
    e_leaves, _ = tree_flatten(expected)
    if (
        sample.kwargs.get("stable") is True
        or rule.indices is None
        or len(e_leaves) <= rule.indices
        or len(a_leaves) != len(e_leaves)
    ):
        return compare(actual, expected, atol, rtol)
    bad = compare(actual, expected, atol, rtol, values=False)  # shapes and dtypes of every output
    if bad:
        return bad
    others = [i for i in range(len(e_leaves)) if i != rule.indices]
    bad = compare([a_leaves[i] for i in others], [e_leaves[i] for i in others], atol, rtol)
    if bad:
        return bad
    a_idx, e_idx = a_leaves[rule.indices], e_leaves[rule.indices]
    if compare(a_idx, e_idx, 0.0, 0.0) is None:
        return None
    if _arg(sample, rule.dim, "dim", rule.default_dim) is None:
        return compare(actual, expected, atol, rtol)
    values = a_leaves[rule.values] if rule.values is not None else None
    problem = arrangement_problem(rule, sample, a_idx, values, e_idx)
    if problem:
        return {"status": "wrong", "reason": f"output {rule.indices} (indices) {problem}"}
    return None


def _exception_status(e: BaseException) -> str:
    text = str(e)
    # By type only: jaxdev raises UnsupportedError for what it cannot hold by design (complex32,
    # sparse layouts); a dtype's name never decides, so a bug raising anything else stays a failure.
    cause: BaseException | None = e
    while cause is not None:  # torch.compile re-raises a backend's error `from` it
        if isinstance(cause, jaxdev.UnsupportedError):
            return "unsupported"
        cause = cause.__cause__
    if any(t in text for t in _LOST_AUTOGRAD_TEXT) or isinstance(e, _LostAutograd):
        return "lost_autograd"
    # Composite kernels raise NotImplementedError for a backend they do not know
    # (convolution_overrideable); the dispatcher says "Could not run".
    if isinstance(e, (jaxdev.fallback.FallbackError, NotImplementedError)) or "Could not run '" in text:
        return "missing"
    return "exception"


def run_sample(unit: sample_db.Unit, sample, repro: str | None = None) -> dict:
    """The verdict for one sample: {status, reason, repro, aten, fallback, [max_abs, max_rel, random,
    uninitialised, arbitrated]}: `arbitrated` when values CPU disagrees with passed by float64
    arbitration (see arbitrate). `repro`: describe(unit, sample), when the caller already has it."""
    op = sample_db.op_db()[unit.op]
    result: dict = {"repro": repro or describe(unit, sample)}
    ref = _reference(unit, op, sample, result)
    if isinstance(ref, dict):
        return ref
    jaxdev.reset_fallback_counts()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            actual, laid = _on_jax(unit, op, sample, ref.seeds)
        except Uncapturable as e:
            return {
                **result,
                "status": "skip",
                "reason": f"torch.compile(fullgraph=True) cannot run it on CPU either: {e}",
            }
        except Exception as e:
            result["fallback"] = sorted(jaxdev.fallback_counts())
            return {**result, "status": _exception_status(e), "reason": short(e)}
    result["fallback"] = sorted(jaxdev.fallback_counts())
    return _judge(unit, op, result, ref, actual, laid, caught)


class _Reference(NamedTuple):
    """CPU's run of a sample: its CPU copy, the outputs (backward: the grads) and grad-output seeds,
    a second untraced run (`again`: strides as a program sees them), and what cannot be compared."""

    sample: object
    expected: object
    seeds: list | None
    again: object
    random: bool
    uninitialised: bool


def _reference(unit, op, sample, result: dict) -> _Reference | dict:
    """The sample on CPU, or the `skip` verdict when CPU gives nothing to compare with. Fills
    result's aten (the overloads reached), random and uninitialised."""
    backward = unit.direction == "backward"
    trace = Trace()
    try:
        cpu_sample = sample_db.to_device(sample, "cpu")
        sample_db.seed_all(0)
        with trace:
            expected, seeds = _call(op, cpu_sample, backward)
        sample_db.seed_all(1)
        again, _ = _call(op, sample_db.to_device(sample, "cpu"), backward)
    except Exception as e:
        return {**result, "status": "skip", "reason": f"CPU raised {short(e)}", "aten": sorted(trace.ops)}
    result["aten"] = sorted(trace.ops)
    if backward and expected is None:
        return {**result, "status": "skip", "reason": "no differentiable output on CPU"}
    # Random ops (dropout, rand_like, ...) and uninitialised memory (empty, new_empty, ...): only
    # shapes and dtypes can be compared.
    uninitialised = bool(trace.ops) and {name.split(".")[0] for name in trace.ops} <= UNINITIALISED
    random = not uninitialised and (
        any(_is_seeded(name) for name in trace.ops) or compare(again, expected, 0.0, 0.0) is not None
    )
    if random:
        result["random"] = True
    if uninitialised:
        result["uninitialised"] = True
    return _Reference(cpu_sample, expected, seeds, again, random, uninitialised)


def _on_jax(unit, op, sample, seeds) -> tuple[object, list]:
    """The sample on jax in the unit's direction: (its outputs as CPU tensors, their layouts on jax)."""
    device_sample = sample_db.to_device(sample, "jax", unit.op)
    sample_db.seed_all(0)
    if unit.direction == "compile":
        return calls.compiled(op, device_sample, lambda device: sample_db.to_device(sample, device, unit.op))
    if unit.direction == "fused":
        return calls.fused(op, device_sample)
    actual, _ = _call(op, device_sample, unit.direction == "backward", seeds)
    laid = layouts(actual)
    return tree_map(to_cpu, actual), laid


def _judge(unit, op, result: dict, ref: _Reference, actual, laid: list, caught) -> dict:
    """The verdict on outputs the device gave (`laid`: their layouts on jax; `caught`: the warnings)."""
    backward = unit.direction == "backward"
    expected, unchecked = ref.expected, ref.random or ref.uninitialised
    untraced = [str(w.message) for w in caught if issubclass(w.category, jaxdev.compiler.program.EagerGraphWarning)]
    lost = [str(w.message) for w in caught if any(t in str(w.message) for t in _LOST_AUTOGRAD_TEXT)]
    if lost:
        return {**result, "status": "lost_autograd", "reason": lost[0].splitlines()[0][:300]}
    if backward:
        for i, (a, e) in enumerate(zip(actual, expected)):
            if a is None and e is not None:
                return {**result, "status": "lost_autograd", "reason": f"grad of input {i} is None on jax"}
    atol, rtol = sample_db.tolerance(unit)
    tied = TIED_INDICES.get(unit.op)
    if tied and not unchecked:
        judge = compare_tied_grads if backward else compare_tied
        bad = judge(tied, ref.sample, actual, expected, atol, rtol)
    else:
        bad = compare(actual, expected, atol, rtol, values=not unchecked)
    gauge = ""
    if bad and not backward and _gauge_free(ref.sample, actual, expected, atol, rtol):
        # PyTorch's own test_compare_cpu compares outputs after the sample's output_process_fn_grad,
        # which removes what the op leaves unspecified (the signs of eigen- and singular vectors)
        bad, gauge = None, "equal to CPU up to what the op leaves unspecified (OpInfo's output_process_fn_grad)"
    arbitrated = ""
    if bad and bad["status"] == "wrong" and not unchecked:
        passed, note = arbitrate(unit, op, ref.sample, actual, expected, ref.seeds, atol, rtol)
        if passed:
            bad, arbitrated = None, note
            result["arbitrated"] = True
        elif note:
            bad["reason"] += f"; {note}"
    if bad:
        if result["fallback"]:
            bad["reason"] += f" (CPU fallback used for {', '.join(result['fallback'])})"
        return {**result, **bad}
    return _correct(result, ref, laid, untraced, gauge or arbitrated)


def _correct(result: dict, ref: _Reference, laid: list, untraced: list, note: str) -> dict:
    """The verdict on values that are right: stride_mismatch, untraced, fallback or pass."""
    # Strides are CPU's as a program sees them: the untraced run's (`again`). Under the Trace mode,
    # composite-compliant formulas take their out-of-place branches (areAnyTensorSubclassLike is true
    # whenever a Python dispatch mode is active): householder_product_backward then builds the input's
    # grad with cat (contiguous) instead of zeros_like(input) (the input's layout), and jax, which runs
    # without the mode, takes the in-place branch as CPU does outside the audit.
    misplaced = _stride_mismatch(laid, ref.again)
    if misplaced:
        return {**result, "status": "stride_mismatch", "reason": misplaced}
    if untraced:
        return {**result, "status": "untraced", "reason": untraced[0].split(": ", 1)[-1][:300]}
    if result["fallback"]:
        return {
            **result,
            "status": "fallback",
            "reason": f"correct only through the CPU fallback for {', '.join(result['fallback'])}",
        }
    unchecked = "random op" if ref.random else "uninitialised memory" if ref.uninitialised else ""
    return {**result, "status": "pass", "reason": f"values unchecked: {unchecked}" if unchecked else note}


def _wide_dtype(dtype: torch.dtype) -> torch.dtype | None:
    """float16/bfloat16/float32 -> float64, complex32/complex64 -> complex128; None for the rest."""
    if dtype in (torch.float16, torch.bfloat16, torch.float32):
        return torch.float64
    if dtype in (torch.complex32, torch.complex64):
        return torch.complex128
    return None


def _widened(x):
    """A reduced-precision floating tensor as its float64/complex128 twin: the same values exactly,
    the same layout (a view of a larger storage keeps reading it, as to_device keeps it) and
    requires_grad; anything else as it is."""
    if not isinstance(x, torch.Tensor) or _wide_dtype(x.dtype) is None:
        return x
    wide = _wide_dtype(x.dtype)
    storage = x.untyped_storage() if x.layout == torch.strided else None
    whole = (
        storage is None
        or x.is_conj()
        or x.is_neg()
        or x.element_size() == 0
        or storage.nbytes() % x.element_size()
        or (x.storage_offset() == 0 and x.is_contiguous() and x.numel() * x.element_size() == storage.nbytes())
    )
    if whole:
        out = x.detach().to(wide)
    else:
        flat = torch.empty(0, dtype=x.dtype).set_(storage).to(wide)
        out = flat.as_strided(x.shape, x.stride(), x.storage_offset())
    return out.detach().requires_grad_(x.requires_grad)


def _wide_sample(sample):
    from torch.testing._internal.opinfo.core import SampleInput

    return SampleInput(
        tree_map(_widened, sample.input),
        args=tree_map(_widened, sample.args),
        kwargs=tree_map(_widened, sample.kwargs),
        output_process_fn_grad=sample.output_process_fn_grad,
        broadcasts_input=sample.broadcasts_input,
        name=sample.name,
    )


def tolerance_units(x: torch.Tensor, wide: torch.Tensor, atol: float, rtol: float) -> float:
    """The worst error of `x` against the float64/complex128 `wide` in units of the tolerance:
    max |x - wide| / (atol + rtol * |wide|). Where `wide` overflows x's dtype, the reference is that
    dtype's infinity (the exact value, rounded). NaN and infinities must sit where the reference has
    them (NaN for NaN, the same infinity), as compare() demands of CPU; elsewhere the error is inf."""
    w = wide.detach()
    rounded = w.to(x.dtype).to(w.dtype)
    w = torch.where(torch.isinf(rounded) & torch.isfinite(w), rounded, w)
    x = x.detach().to(w.dtype)
    if x.numel() == 0:
        return 0.0
    exact = (x == w) | (torch.isnan(x) & torch.isnan(w))
    finite = torch.isfinite(x) & torch.isfinite(w)
    err = (x - w).abs().to(torch.float64) / (atol + rtol * w.abs().to(torch.float64))
    err = torch.where(finite, err, torch.full((), math.inf, dtype=torch.float64))
    return float(torch.where(exact, torch.zeros((), dtype=torch.float64), err).max())


def _units(x: float) -> str:
    return f"{x:.2g}" if x < 100 else f"{x:.0f}"


def arbitrate(unit, op, cpu_sample, actual, expected, seeds, atol: float, rtol: float) -> tuple[bool, str]:
    """Whether a `wrong` sample of a reduced-precision dtype (facts.ARBITRATED_DTYPES) is a
    rounding difference that jax does not lose: (passed, what to add to the reason).

    CPU runs the same sample once more with its floating tensors widened (float16, bfloat16,
    float32 -> float64; complex64 -> complex128; same layout, requires_grad kept; backward with the
    same grad-output seeds widened): the exact result of the narrow inputs, up to float64's own
    rounding. Each output where jax and CPU disagree is measured against it in units of its
    tolerance (tolerance_units: NaN and infinities must sit where the exact result, rounded to the
    output's dtype, has them). The sample passes when jax's worst error is at most 1 (within
    tolerance of the exact result) or at most CPU's own worst error (CPU is as far off), CPU's error
    counting up to facts.ARBITRATION_CPU_BOUND only.

    Guards, each leaving the verdict `wrong` (with the reason saying why):
    - Only floating outputs of a reduced-precision dtype are arbitrated, and only where the wide run
      gives the wide version of CPU's dtype: an op whose output dtype does not follow its inputs (an
      explicit dtype=, a fixed result dtype) would not compute the narrow op more exactly. Integer,
      bool, float64 and non-tensor outputs must agree with CPU as they are: a wrong index stays wrong.
    - A wide run that raises, or gives other outputs or shapes, decides nothing.
    - Ops whose result depends on the dtype itself and not only on its rounding are never
      arbitrated (facts.NOT_ARBITRATED); ops with a dtype-epsilon cut-off only where CPU is itself
      within the bound of the wide result, i.e. the cut-off decided nothing (facts.DTYPE_DEPENDENT).
      Ops with tied indices (facts.TIED_INDICES) have their own judge and are not arbitrated.
    - CPU's error is bounded before it excuses jax's: past the bound CPU's result is not the exact
      one rounded but another computation (an overflow, a branch or bin crossed by rounding), and
      would excuse any jax value; jax must then be within tolerance of the exact result itself.
    A genuinely wrong value is far from the exact result where CPU is close, so it stays wrong. The
    caller runs this only on samples already `wrong` (cheap), never on random or uninitialised ones."""
    if unit.dtype not in ARBITRATED_DTYPES:
        return False, ""
    if unit.op in NOT_ARBITRATED:
        return False, f"not arbitrated against float64: {NOT_ARBITRATED[unit.op]}"
    if unit.op in TIED_INDICES:
        return False, ""
    backward = unit.direction == "backward"
    try:
        wide_seeds = [_widened(s) for s in seeds] if backward else None
        sample_db.seed_all(0)
        wide, _ = _call(op, _wide_sample(cpu_sample), backward, wide_seeds)
    except Exception as e:
        return False, f"not arbitrated: the float64 run raised {short(e)}"
    if not backward:
        # what the op leaves unspecified (signs of eigenvectors) is removed from all three, as
        # _gauge_free removes it before comparing with CPU
        process = cpu_sample.output_process_fn_grad
        try:
            if not (getattr(process, "__name__", "") == "<lambda>" and process(expected) is expected):
                actual, expected, wide = process(actual), process(expected), process(wide)
        except Exception:
            return False, ""
    a_leaves, e_leaves, w_leaves = (tree_flatten(x)[0] for x in (actual, expected, wide))
    if not len(a_leaves) == len(e_leaves) == len(w_leaves):
        return False, "not arbitrated: the float64 run gives other outputs"
    jax_err = cpu_err = 0.0
    for i, (a, e, w) in enumerate(zip(a_leaves, e_leaves, w_leaves)):
        where = f"output {i}" if len(e_leaves) > 1 else "the output"
        if compare(a, e, atol, rtol) is None:
            continue
        if not (isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor) and isinstance(w, torch.Tensor)):
            return False, f"not arbitrated: {where} is not a tensor"
        name = sample_db.dtype_name
        if name(e.dtype) not in ARBITRATED_DTYPES:
            return False, f"not arbitrated: {where} is {name(e.dtype)} (only {', '.join(ARBITRATED_DTYPES)} are)"
        if w.dtype != _wide_dtype(e.dtype):
            return False, (
                f"not arbitrated: {where} is {name(e.dtype)} for {unit.dtype} inputs and {name(w.dtype)} for "
                "widened ones (its dtype does not follow the inputs)"
            )
        if a.layout != torch.strided or e.layout != torch.strided or w.layout != torch.strided:
            return False, f"not arbitrated: {where} is {e.layout}"
        if a.shape != w.shape:
            return False, "not arbitrated: the float64 run gives other shapes"
        default_rtol, default_atol = default_tolerances(e)
        out_atol, out_rtol = max(atol, default_atol), max(rtol, default_rtol)
        jax_err = max(jax_err, tolerance_units(a, w, out_atol, out_rtol))
        cpu_err = max(cpu_err, tolerance_units(e, w, out_atol, out_rtol))
    ref = "complex128" if any(isinstance(w, torch.Tensor) and w.is_complex() for w in w_leaves) else "float64"
    numbers = f"jax {_units(jax_err)}x tolerance, CPU {_units(cpu_err)}x"
    if unit.op in DTYPE_DEPENDENT and cpu_err > ARBITRATION_CPU_BOUND:
        return False, (
            f"not arbitrated: {DTYPE_DEPENDENT[unit.op]}, and CPU is {_units(cpu_err)}x tolerance from the "
            f"{ref} result (the cut-off may decide); jax {_units(jax_err)}x"
        )
    if jax_err <= 1.0 or jax_err <= min(cpu_err, ARBITRATION_CPU_BOUND):
        if jax_err < cpu_err:
            return True, f"closer to the {ref} result than CPU: {numbers}"
        if jax_err == cpu_err:
            return True, f"as close to the {ref} result as CPU: {numbers}"
        return True, f"within tolerance of the {ref} result: {numbers}"
    if jax_err <= cpu_err:
        return False, (
            f"not arbitrated: CPU is {_units(cpu_err)}x tolerance from the {ref} result, over the "
            f"{ARBITRATION_CPU_BOUND:g}x that may excuse jax's {_units(jax_err)}x"
        )
    return False, f"farther from the {ref} result than CPU: {numbers}"


def _gauge_free(sample, actual, expected, atol, rtol) -> bool:
    """Whether the outputs agree once the sample's output_process_fn_grad has normalised both."""
    process = sample.output_process_fn_grad
    if getattr(process, "__name__", "") == "<lambda>" and process(expected) is expected:
        return False  # the identity: nothing is unspecified
    try:
        return compare(process(actual), process(expected), atol, rtol) is None
    except Exception:
        return False


def _stride_mismatch(layouts: list, expected) -> str | None:
    """Where a dense, non-overlapping CPU result of more than one element has other strides on jax
    (dims of length 1 reach no other element: their strides do not count)."""
    e_leaves, _ = tree_flatten(expected)
    for i, (laid, e) in enumerate(zip(layouts, e_leaves)):
        if laid is None or not isinstance(e, torch.Tensor) or e.layout != torch.strided or e.numel() <= 1:
            continue
        if not is_non_overlapping_and_dense(e):
            continue
        shape, strides = laid
        if any(n > 1 and s != t for n, s, t in zip(shape, strides, e.stride())):
            where = f"output {i}" if len(e_leaves) > 1 else "output"
            return f"{where} strides {list(strides)}, CPU gives {list(e.stride())} (shape {list(shape)})"
    return None


def _is_seeded(name: str) -> bool:
    from jaxdev.audit.dispatch import overload

    op = overload(name)
    return op is not None and torch.Tag.nondeterministic_seeded in op.tags


def describe(unit, sample) -> str:
    """A minimal repro line: the unit, then the sample's shapes, dtypes, args and kwargs."""
    try:
        described = sample.summary()
    except Exception:  # summary() is best effort on exotic samples
        described = repr(sample)[:500]
    return f"{unit.op} {unit.dtype} {unit.direction}: {described}"
