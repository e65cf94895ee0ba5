"""Run one OpInfo sample on CPU and on the device under test (devices.py: jaxdev's `jax`, or a peer
backend's in its own workers), and classify what the device did (the statuses and their order are
in facts.py). Directions: forward and backward run the op eagerly; compile runs the forward through
`torch.compile(backend="jax", fullgraph=True)` and compile-backward its gradients through the
compiled forward and backward graphs, each judged as its eager twin is (against CPU's eager run);
fused runs the forward in fused eager mode (calls.py), and is judged as forward is. How each runs
on the device is the device's (devices.Device.run); the judging is the same for every device.

The judging API, which run_sample and the direct trials (schema_samples/trial.py) both use: `call`
(an OpInfo sample run forward or backward), `differs` (values, dtypes and shapes within
tolerances; `compare` the same as a mapping), `exception_status` (what a raise on the device means),
`stride_mismatch` (where the device lays a result out otherwise than CPU) and `UNINITIALISED`
(allocations compared by shape and dtype only); calls.layouts gives the outputs' layouts.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from jaxdev.audit import calls, devices
from jaxdev.audit import samples as sample_db

# arbitrate, tolerance_units, compare, compare_tied, compare_tied_grads and arrangement_problem are
# the judges' own modules' (arbitration.py, compare.py); check.X still names them, as callers know them.
from jaxdev.audit.arbitration import FARTHER, arbitrate, tolerance_units  # noqa: F401
from jaxdev.audit.calls import Uncapturable, call, short
from jaxdev.audit.compare import arrangement_problem, compare, compare_tied, compare_tied_grads, differs  # noqa: F401
from jaxdev.audit.facts import BACKWARD_DIRECTIONS, COMPILED_DIRECTIONS, TIED_INDICES
from jaxdev.audit.facts.aten import UNINITIALISED
from jaxdev.audit.model import Verdict


class Trace(TorchDispatchMode):
    """Records the aten overloads a call reaches after CompositeImplicitAutograd decomposition."""

    def __init__(self):
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func.name())
        return func(*args, **(kwargs or {}))


def exception_status(e: BaseException) -> str:
    """The status of a raise on the device under test (devices.current()): unsupported (jaxdev cannot
    hold the tensors by design), lost_autograd, missing or exception."""
    return devices.current().exception_status(e)


def run_sample(unit: sample_db.Unit, sample, repro: str | None = None, device: devices.Device | None = None) -> Verdict:
    """The verdict for one sample (model.Verdict) on `device` (default: the device under test,
    devices.current()): `arbitrated` when values CPU disagrees with passed by float64 arbitration
    (see arbitrate). `repro`: describe(unit, sample), when the caller already has it."""
    device = device or devices.current()
    op = sample_db.op_db()[unit.op]
    result = Verdict("pass", repro=repro or describe(unit, sample))
    ref = _reference(unit, op, sample, result)
    if isinstance(ref, Verdict):
        return ref
    device.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            actual, laid = device.run(unit, op, sample, ref.seeds)
        except Uncapturable as e:
            return result.but(status="skip", reason=f"torch.compile(fullgraph=True) cannot run it on CPU either: {e}")
        except Exception as e:
            result.fallback = device.fallback_ops()
            return result.but(status=device.exception_status(e), reason=short(e))
    result.fallback = device.fallback_ops()
    return _judge(unit, op, result, ref, (actual, laid), caught, sample, device)


class _Reference(NamedTuple):
    """CPU's run of a sample: its CPU copy, the outputs (backward: the grads) and grad-output seeds,
    the identical call once more (`repeat`), a run under another seed (`again`: strides as a
    program sees them, and whether the op is random), what cannot be compared, and how CPU's two
    identical calls differ (`unstable`: "" when they agree)."""

    sample: object
    expected: object
    seeds: list | None
    again: object
    random: bool
    uninitialised: bool
    repeat: object = None
    unstable: str = ""


def _reference(unit, op, sample, result: Verdict) -> _Reference | Verdict:
    """The sample on CPU, or the `skip` verdict when CPU gives nothing to compare with. Fills
    result's aten (the overloads reached), random and uninitialised."""
    backward = unit.direction in BACKWARD_DIRECTIONS
    trace = Trace()
    try:
        cpu_sample = sample_db.to_device(sample, "cpu")
        sample_db.seed_all(0)
        with trace:
            expected, seeds = call(op, cpu_sample, backward)
        sample_db.seed_all(0)
        repeat, _ = call(op, sample_db.to_device(sample, "cpu"), backward, seeds)  # the identical call
        sample_db.seed_all(1)
        again, _ = call(op, sample_db.to_device(sample, "cpu"), backward)
    except Exception as e:
        return result.but(status="skip", reason=f"CPU raised {short(e)}", aten=sorted(trace.ops))
    result.aten = sorted(trace.ops)
    if backward and expected is None:
        return result.but(status="skip", reason="no differentiable output on CPU")
    # Random ops (dropout, rand_like, ...) and uninitialised memory (empty, new_empty, ...): only
    # shapes and dtypes can be compared.
    uninitialised = bool(trace.ops) and {name.split(".")[0] for name in trace.ops} <= UNINITIALISED
    # CPU giving other values for the identical call is not randomness: jax is judged against both
    # results (and float64), and the reason says so (unstable_note), rather than the verdict flipping.
    itself = None if uninitialised else differs(repeat, expected, 0.0, 0.0)
    random = not uninitialised and (
        any(_is_seeded(name) for name in trace.ops)
        or (itself is None and differs(again, expected, 0.0, 0.0) is not None)
    )
    unstable = unstable_note(itself) if itself is not None and not random else ""
    result.random, result.uninitialised, result.unstable = random, uninitialised, bool(unstable)
    return _Reference(cpu_sample, expected, seeds, again, random, uninitialised, repeat, unstable)


def unstable_note(itself: Verdict) -> str:
    """How CPU's two identical calls differ, in words (`itself`: differs' verdict between them)."""
    if itself.status == "wrong" and itself.max_abs is not None:
        return (
            f"CPU gives two results for identical calls (max abs diff {itself.max_abs:.3g}, max rel diff "
            f"{itself.max_rel:.3g}): jax is judged against both and the float64 result"
        )
    return f"CPU gives two results for identical calls ({itself.reason}): jax is judged against both"


def _judge(unit, op, result: Verdict, ref: _Reference, outputs: tuple, caught, sample, device) -> Verdict:
    """The verdict on `outputs` the device gave: (as CPU tensors, their layouts on jax); `caught`:
    the warnings; `sample`: the CPU sample, to copy again."""
    actual, laid = outputs
    backward = unit.direction in BACKWARD_DIRECTIONS
    expected = ref.expected
    untraced = device.untraced(caught)
    lost = devices.lost_autograd_warnings(caught)
    if lost:
        return result.but(status="lost_autograd", reason=lost[0].splitlines()[0][:300])
    if backward:
        for i, (a, e) in enumerate(zip(actual, expected)):
            if a is None and e is not None:
                return result.but(status="lost_autograd", reason=f"grad of input {i} is None on jax")
    atol, rtol = sample_db.tolerance(unit)
    bad = _compared(unit, ref, actual, expected, (atol, rtol))
    if bad and ref.unstable and _compared(unit, ref, actual, ref.repeat, (atol, rtol)) is None:
        bad = None  # as CPU's other result for the identical call
    note = ""
    compiled = unit.direction in COMPILED_DIRECTIONS and device.compile_reference
    if bad:
        bad, note = _excused(unit, op, sample, ref, actual, bad, (atol, rtol), result, compiled)
    if bad:
        if result.fallback:
            bad.reason += f" (CPU fallback used for {', '.join(result.fallback)})"
        if ref.unstable:
            bad.reason += f"; {ref.unstable}"
            if _undecided(unit, ref, bad, (atol, rtol)):
                return result.but(status="skip", reason=f"no verdict: jax matches neither: {bad.reason}")
        return result.but(status=bad.status, reason=bad.reason, max_abs=bad.max_abs, max_rel=bad.max_rel)
    misplaced, strides_note = _misplaced(unit, op, sample, ref, laid, compiled)
    return _correct(result, ref, misplaced, untraced, "; ".join(x for x in (note or strides_note, ref.unstable) if x))


def _undecided(unit, ref: _Reference, bad: Verdict, tolerance: tuple) -> bool:
    """Whether a `wrong` sample has no reference to be wrong against: CPU's two results for the
    identical call differ beyond the tolerance, jax's matches neither, and float64 arbitration did
    not measure jax farther from the exact result than CPU (it could not judge: a dtype it does not
    arbitrate, an integer output, an op whose cut-off is the dtype's epsilon). Such a sample is
    `skip` (no verdict), as is one CPU raises on: linalg.lstsq's complex `gels` on CPU gives results
    28 apart for identical calls, where jax is 0.39x tolerance from the complex128 result."""
    if bad.status != "wrong" or FARTHER in bad.reason:
        return False
    return _compared(unit, ref, ref.repeat, ref.expected, tolerance) is not None


def _compared(unit, ref: _Reference, actual, expected, tolerance: tuple) -> Verdict | None:
    """compare(), or the op's tie rule (facts.TIED_INDICES), of jax's outputs with a CPU result."""
    atol, rtol = tolerance
    unchecked = ref.random or ref.uninitialised
    tied = TIED_INDICES.get(unit.op)
    if tied and not unchecked:
        judge = compare_tied_grads if unit.direction in BACKWARD_DIRECTIONS else compare_tied
        return judge(tied, ref.sample, actual, expected, atol, rtol)
    return differs(actual, expected, atol, rtol, values=not unchecked)


def _excused(
    unit, op, sample, ref: _Reference, actual, bad: Verdict, tolerance: tuple, result: Verdict, compiled: bool
):
    """(bad or None, a note): whether a sample that differs from CPU's eager run is right after all.
    Up to what the op leaves unspecified (forward); by float64 arbitration (`wrong` reduced-precision
    samples: result's `arbitrated` is set); or, in a compiled direction, as torch.compile's own run
    on CPU gives it (calls.compiled_on_cpu: its graphs on CPU's kernels): the graph dynamo and
    AOTAutograd traced computes otherwise than the eager op (addcdiv(value=) becomes div, mul and
    add, each rounded to float16), and the jax backend runs that graph as CPU's kernels run it
    (`compiled`: a torch.compile direction, where that run is a reference)."""
    atol, rtol = tolerance
    backward, unchecked = unit.direction in BACKWARD_DIRECTIONS, ref.random or ref.uninitialised
    if not backward and _gauge_free(ref.sample, actual, ref.expected, atol, rtol):
        # PyTorch's own test_compare_cpu compares outputs after the sample's output_process_fn_grad,
        # which removes what the op leaves unspecified (the signs of eigen- and singular vectors)
        return None, "equal to CPU up to what the op leaves unspecified (OpInfo's output_process_fn_grad)"
    if bad.status == "wrong" and not unchecked:
        repeats = [ref.repeat] if ref.unstable else []
        passed, note = arbitrate(unit, op, ref.sample, actual, ref.expected, ref.seeds, atol, rtol, repeats)
        if passed:
            result.arbitrated = True
            return None, note
        if note:
            bad.reason += f"; {note}"
    if not compiled or unchecked:
        return bad, ""
    try:
        sample_db.seed_all(0)
        compiled, _ = calls.compiled_on_cpu(op, sample_db.to_device(sample, "cpu"), ref.seeds)
    except Exception as e:
        bad.reason += f"; torch.compile on CPU raised {short(e)}"
        return bad, ""
    if differs(actual, compiled, atol, rtol) is not None:
        return bad, ""
    return (
        None,
        f"as torch.compile computes it on CPU too (its graphs on CPU's kernels); against CPU's eager run: {bad.reason}",
    )


def _misplaced(unit, op, sample, ref: _Reference, laid: list, compiled: bool) -> tuple[str | None, str]:
    """(where the device's layouts differ from CPU's, a note when they differ from CPU's eager run
    only as torch.compile itself lays them out).

    Strides are CPU's as a program sees them: the untraced run's (`again`). Under the Trace mode,
    composite-compliant formulas take their out-of-place branches (areAnyTensorSubclassLike is true
    whenever a Python dispatch mode is active): householder_product_backward then builds the input's
    grad with cat (contiguous) instead of zeros_like(input) (the input's layout), and jax, which runs
    without the mode, takes the in-place branch as CPU does outside the audit.

    A compiled direction's layouts are what AOTAutograd plans from the meta functions (a backward
    graph's grads contiguous where eager's formula keeps the input's layout: rot90, ormqr; a float16
    mul's meta strides that its eager kernel does not give: tensordot); where they differ from CPU's
    eager run, torch.compile's own run on CPU (calls.compiled_on_cpu: its graphs' outputs as their
    meta lays them out) is the reference: its layouts are not jaxdev's to change."""
    misplaced = stride_mismatch(laid, ref.again)
    if not misplaced or not compiled:
        return misplaced, ""
    try:
        sample_db.seed_all(0)
        _, cpu_compiled = calls.compiled_on_cpu(op, sample_db.to_device(sample, "cpu"), ref.seeds)
    except Exception as e:
        return f"{misplaced}; torch.compile on CPU raised {short(e)}", ""
    if cpu_compiled != laid:
        return misplaced, ""
    return (
        None,
        f"strides as torch.compile plans them on CPU too (its graphs' meta strides); CPU's eager run: {misplaced}",
    )


def _correct(result: Verdict, ref: _Reference, misplaced: str | None, untraced: list, note: str) -> Verdict:
    """The verdict on values that are right: stride_mismatch, untraced, fallback or pass."""
    if misplaced:
        return result.but(status="stride_mismatch", reason=misplaced)
    if untraced:
        return result.but(status="untraced", reason=untraced[0].split(": ", 1)[-1][:300])
    if result.fallback:
        return result.but(
            status="fallback", reason=f"correct only through the CPU fallback for {', '.join(result.fallback)}"
        )
    unchecked = "random op" if ref.random else "uninitialised memory" if ref.uninitialised else ""
    return result.but(status="pass", reason=f"values unchecked: {unchecked}" if unchecked else note)


def _gauge_free(sample, actual, expected, atol, rtol) -> bool:
    """Whether the outputs agree once the sample's output_process_fn_grad has normalised both."""
    process = sample.output_process_fn_grad
    if getattr(process, "__name__", "") == "<lambda>" and process(expected) is expected:
        return False  # the identity: nothing is unspecified
    try:
        return differs(process(actual), process(expected), atol, rtol) is None
    except Exception:
        return False


def stride_mismatch(layouts: list, expected) -> str | None:
    """Where a dense, non-overlapping CPU result of more than one element has other strides on jax
    (dims of length 1 reach no other element: their strides do not count)."""
    e_leaves, _ = tree_flatten(expected)
    for i, (laid, e) in enumerate(zip(layouts, e_leaves)):
        if laid is None or not isinstance(e, torch.Tensor) or e.layout != torch.strided or e.numel() <= 1:
            continue
        if not _dense(e.shape, e.stride()):
            continue
        shape, strides = laid
        if any(n > 1 and s != t for n, s, t in zip(shape, strides, e.stride())):
            where = f"output {i}" if len(e_leaves) > 1 else "output"
            return f"{where} strides {list(strides)}, CPU gives {list(e.stride())} (shape {list(shape)})"
    return None


def _dense(shape, strides) -> bool:
    """Some permutation of the dims is contiguous (size-1 dims' strides are free), as jaxdev.core.limits
    tells a dense, non-overlapping tensor (not imported: a peer's worker never loads jaxdev's device)."""
    expected = 1
    for stride, size in sorted((s, n) for n, s in zip(shape, strides) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _is_seeded(name: str) -> bool:
    from jaxdev.audit.schemas import overload

    op = overload(name)
    return op is not None and torch.Tag.nondeterministic_seeded in op.tags


def describe(unit, sample) -> str:
    """A minimal repro line: the unit, then the sample's shapes, dtypes, args and kwargs."""
    try:
        described = sample.summary()
    except Exception:  # summary() is best effort on exotic samples
        described = repr(sample)[:500]
    return f"{unit.op} {unit.dtype} {unit.direction}: {described}"
