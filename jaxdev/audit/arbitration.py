"""Float64 arbitration: whether a `wrong` sample of a reduced-precision dtype is a rounding
difference that jax does not lose (arbitrate; the rule is in facts.py beside its bounds)."""

from __future__ import annotations

import math

import torch
from torch.testing._comparison import default_tolerances
from torch.utils._pytree import tree_flatten, tree_map

from jaxdev.audit import samples as sample_db
from jaxdev.audit.calls import call, short
from jaxdev.audit.compare import differs
from jaxdev.audit.facts import (
    ARBITRATED_DTYPES,
    ARBITRATION_CPU_BOUND,
    ARBITRATION_ORDER_SLACK,
    BACKWARD_DIRECTIONS,
    DTYPE_DEPENDENT,
    NOT_ARBITRATED,
    TIED_INDICES,
)

# How a note of arbitrate begins when it measured jax farther from the exact result than CPU: a
# decided `wrong` (every other note that fails says why nothing was decided).
FARTHER = "farther from the"


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


def arbitrate(unit, op, cpu_sample, actual, expected, seeds, atol: float, rtol: float, repeats=()) -> tuple[bool, str]:
    """Whether a `wrong` sample of a reduced-precision dtype (facts.ARBITRATED_DTYPES) is a
    rounding difference that jax does not lose: (passed, what to add to the reason). `repeats`:
    CPU's other results for the identical call, where CPU gives more than one (check._reference):
    CPU's error is then its worst result's.

    CPU runs the same sample once more with its floating tensors widened (float16, bfloat16,
    float32 -> float64; complex64 -> complex128; same layout, requires_grad kept; backward with the
    same grad-output seeds widened): the exact result of the narrow inputs, up to float64's own
    rounding. Each output where jax and CPU disagree is measured against it in units of its
    tolerance (tolerance_units: NaN and infinities must sit where the exact result, rounded to the
    output's dtype, has them). The sample passes when jax's worst error is at most 1 (within
    tolerance of the exact result) or at most CPU's own worst error (CPU is as far off), CPU's error
    counting up to facts.ARBITRATION_CPU_BOUND only. Where CPU is itself beyond tolerance of the
    exact result, jax passes within facts.ARBITRATION_ORDER_SLACK times CPU's error too (rounding
    order alone moves a sum's worst error that much: the verdict must not hang on it).

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
    backward = unit.direction in BACKWARD_DIRECTIONS
    try:
        wide_seeds = [_widened(s) for s in seeds] if backward else None
        sample_db.seed_all(0)
        wide, _ = call(op, _wide_sample(cpu_sample), backward, wide_seeds)
    except Exception as e:
        return False, f"not arbitrated: the float64 run raised {short(e)}"
    if not backward:
        # what the op leaves unspecified (signs of eigenvectors) is removed from all three, as
        # _gauge_free removes it before comparing with CPU
        process = cpu_sample.output_process_fn_grad
        try:
            if not (getattr(process, "__name__", "") == "<lambda>" and process(expected) is expected):
                actual, expected, wide = process(actual), process(expected), process(wide)
                repeats = [process(r) for r in repeats]
        except Exception:
            return False, ""
    a_leaves, e_leaves, w_leaves = (tree_flatten(x)[0] for x in (actual, expected, wide))
    if not len(a_leaves) == len(e_leaves) == len(w_leaves):
        return False, "not arbitrated: the float64 run gives other outputs"
    others = [tree_flatten(r)[0] for r in repeats]
    others = [leaves for leaves in others if len(leaves) == len(e_leaves)]
    distances = _distances(unit, (a_leaves, e_leaves, w_leaves), others, atol, rtol)
    if isinstance(distances, str):
        return False, distances
    ref = "complex128" if any(isinstance(w, torch.Tensor) and w.is_complex() for w in w_leaves) else "float64"
    return _verdict(unit, *distances, ref)


def _distances(unit, leaves: tuple, others: list, atol: float, rtol: float) -> tuple[float, float] | str:
    """(jax's, CPU's) worst error against the wide result, in tolerances, over the outputs where
    they disagree (`leaves`: jax's, CPU's and the wide run's; `others`: CPU's other results for the
    identical call, whose errors count as CPU's); or why the sample is not arbitrated (arbitrate's
    guards on outputs)."""
    a_leaves, e_leaves, w_leaves = leaves
    jax_err = cpu_err = 0.0
    for i, (a, e, w) in enumerate(zip(a_leaves, e_leaves, w_leaves)):
        where = f"output {i}" if len(e_leaves) > 1 else "the output"
        if differs(a, e, atol, rtol) is None:
            continue
        if not (isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor) and isinstance(w, torch.Tensor)):
            return f"not arbitrated: {where} is not a tensor"
        name = sample_db.dtype_name
        if name(e.dtype) not in ARBITRATED_DTYPES:
            return f"not arbitrated: {where} is {name(e.dtype)} (only {', '.join(ARBITRATED_DTYPES)} are)"
        if w.dtype != _wide_dtype(e.dtype):
            return (
                f"not arbitrated: {where} is {name(e.dtype)} for {unit.dtype} inputs and {name(w.dtype)} for "
                "widened ones (its dtype does not follow the inputs)"
            )
        if a.layout != torch.strided or e.layout != torch.strided or w.layout != torch.strided:
            return f"not arbitrated: {where} is {e.layout}"
        if a.shape != w.shape:
            return "not arbitrated: the float64 run gives other shapes"
        default_rtol, default_atol = default_tolerances(e)
        out_atol, out_rtol = max(atol, default_atol), max(rtol, default_rtol)
        jax_err = max(jax_err, tolerance_units(a, w, out_atol, out_rtol))
        cpu_err = max(cpu_err, tolerance_units(e, w, out_atol, out_rtol))
        for other in others:
            r = other[i]
            if isinstance(r, torch.Tensor) and r.shape == w.shape and r.dtype == e.dtype:
                cpu_err = max(cpu_err, tolerance_units(r, w, out_atol, out_rtol))
    return jax_err, cpu_err


def _verdict(unit, jax_err: float, cpu_err: float, ref: str) -> tuple[bool, str]:
    """arbitrate's rule on the two distances (`ref`: the wide dtype's name)."""
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
    if cpu_err > 1.0 and jax_err <= min(ARBITRATION_ORDER_SLACK * cpu_err, ARBITRATION_CPU_BOUND):
        return True, (
            f"as far from the {ref} result as CPU up to rounding order (CPU itself is beyond tolerance; "
            f"within {ARBITRATION_ORDER_SLACK:g}x CPU's error): {numbers}"
        )
    if jax_err <= cpu_err:
        return False, (
            f"not arbitrated: CPU is {_units(cpu_err)}x tolerance from the {ref} result, over the "
            f"{ARBITRATION_CPU_BOUND:g}x that may excuse jax's {_units(jax_err)}x"
        )
    return False, f"{FARTHER} {ref} result than CPU: {numbers}"
