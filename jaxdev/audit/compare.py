"""How the auditor compares the device's outputs with CPU's: values within tolerance, shapes and
dtypes (compare, the one jax-vs-CPU comparison the auditor and the tests both judge with), and for
ops that may order or pick tied elements as they like (facts.TIED_INDICES) any valid arrangement of
the ties (compare_tied, compare_tied_grads)."""

from __future__ import annotations

import math

import torch
from torch.testing._comparison import default_tolerances
from torch.utils._pytree import tree_flatten

from jaxdev.audit import samples as sample_db
from jaxdev.audit.facts import TiedIndices
from jaxdev.audit.model import Verdict


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
    """differs() as a mapping {status, reason[, max_abs, max_rel]}: the form the tests' helpers read
    (tests/jaxdev_testing.py, tests/fuzz_cases.py)."""
    bad = differs(actual, expected, atol, rtol, values, floor)
    if bad is None:
        return None
    extra = {"max_abs": bad.max_abs, "max_rel": bad.max_rel} if bad.max_abs is not None else {}
    return {"status": bad.status, "reason": bad.reason, **extra}


def differs(actual, expected, atol: float, rtol: float, values: bool = True, floor: bool = True) -> Verdict | None:
    """None if the outputs (CPU tensors, or nests of them) agree; else the Verdict (status, reason,
    and for `wrong` values max_abs, max_rel). The one jax-vs-CPU comparison: the auditor and the tests both judge with it.
    `floor`: a tolerance never below assert_close's default for the output's dtype (the auditor's
    rule); tests that demand exactness pass False."""
    a_leaves, e_leaves = tree_flatten(actual)[0], tree_flatten(expected)[0]
    if len(a_leaves) != len(e_leaves):
        return Verdict("shape_mismatch", f"{len(a_leaves)} outputs, CPU gives {len(e_leaves)}")
    worst_abs = worst_rel = 0.0
    bad = None
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        where = f"output {i}" if len(e_leaves) > 1 else "output"
        if isinstance(e, torch.Tensor) != isinstance(a, torch.Tensor):
            return Verdict("shape_mismatch", f"{where} is {type(a).__name__}, CPU gives {type(e).__name__}")
        if not isinstance(e, torch.Tensor):
            if values and not (
                a == e
                or (
                    isinstance(a, float)
                    and isinstance(e, float)
                    and (math.isclose(a, e, rel_tol=rtol, abs_tol=atol) or (math.isnan(a) and math.isnan(e)))
                )
            ):
                bad = bad or Verdict("wrong", f"{where} is {a!r}, CPU gives {e!r}")
            continue
        if tuple(a.shape) != tuple(e.shape):
            return Verdict("shape_mismatch", f"{where} shape {list(a.shape)}, CPU gives {list(e.shape)}")
        if a.dtype != e.dtype:
            names = sample_db.dtype_name(a.dtype), sample_db.dtype_name(e.dtype)
            return Verdict("dtype_mismatch", f"{where} dtype {names[0]}, CPU gives {names[1]}")
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
            bad = bad or Verdict("wrong", f"{where} differs (atol {out_atol:g}, rtol {out_rtol:g})")
    if bad and bad.status == "wrong" and (worst_abs or worst_rel):
        bad.max_abs, bad.max_rel = worst_abs, worst_rel
        bad.reason += f": max abs err {worst_abs:.3g}, max rel err {worst_rel:.3g}"
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


def compare_tied_grads(rule: TiedIndices, sample, actual, expected, atol: float, rtol: float) -> Verdict | None:
    """differs() for gradients of an op in facts.TIED_INDICES: as CPU's, or as CPU's up to a
    reordering within each group of tied input elements along the dim."""
    bad = differs(actual, expected, atol, rtol)
    dim = _arg(sample, rule.dim, "dim", rule.default_dim)
    if not bad or bad.status != "wrong" or sample.kwargs.get("stable") is True or dim is None:
        return bad
    x = sample.input.detach()
    a_leaves, e_leaves = tree_flatten(actual)[0], tree_flatten(expected)[0]
    if x.dim() == 0 or len(e_leaves) != 1 or not isinstance(a_leaves[0], torch.Tensor):
        return bad
    a, e = a_leaves[0], e_leaves[0]
    if a.shape != x.shape or e.shape != x.shape or x.is_complex():
        return bad
    d = dim % x.dim()
    regrouped = differs(_by_value_then_grad(x, a, d), _by_value_then_grad(x, e, d), atol, rtol)
    if regrouped:
        regrouped.reason += " (also after reordering within tied elements)"
    return regrouped


def compare_tied(rule: TiedIndices, sample, actual, expected, atol: float, rtol: float) -> Verdict | None:
    """differs() for an op in facts.TIED_INDICES: the outputs other than the indices as usual; the
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
        return differs(actual, expected, atol, rtol)
    bad = differs(actual, expected, atol, rtol, values=False)  # shapes and dtypes of every output
    if bad:
        return bad
    others = [i for i in range(len(e_leaves)) if i != rule.indices]
    bad = differs([a_leaves[i] for i in others], [e_leaves[i] for i in others], atol, rtol)
    if bad:
        return bad
    a_idx, e_idx = a_leaves[rule.indices], e_leaves[rule.indices]
    if differs(a_idx, e_idx, 0.0, 0.0) is None:
        return None
    if _arg(sample, rule.dim, "dim", rule.default_dim) is None:
        return differs(actual, expected, atol, rtol)
    values = a_leaves[rule.values] if rule.values is not None else None
    problem = arrangement_problem(rule, sample, a_idx, values, e_idx)
    if problem:
        return Verdict("wrong", f"output {rule.indices} (indices) {problem}")
    return None
