"""One direct trial (worker side): find a candidate CPU accepts, learn what of CPU's result is
stable, run the candidate on jax, and judge it with check's judging API."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable
from typing import NamedTuple

from jaxdev.audit.facts.aten import (
    DEVICE_RESULTS,
    GAUGE_NOTE,
    PARTLY_UNWRITTEN,
    UNCHECKED,
    UNINITIALISED,
    UNINITIALISED_TRIALS,
    UNTRIABLE,
)
from jaxdev.audit.model import Verdict
from jaxdev.audit.schema_samples.build import Unbuildable, candidates, is_out
from jaxdev.audit.schema_samples.donors import describe, donor_candidates
from jaxdev.audit.schema_samples.gauge import gauge_free


def short(e: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else ''}"


def _outputs(result, kwargs, written):
    """What the op produced: its return value and the arguments it wrote."""
    return [result] + [kwargs[w] for w in written if w in kwargs]


def _prefill_outs(op, kwargs, written, expected) -> None:
    """Size the out= tensors as CPU's results and fill them with a sentinel (NaN, or -77 for
    integers): what the op leaves unwritten then differs from the first run's."""
    import torch

    outs = {a.name for a in op._schema.arguments if is_out(a)}
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


def _is_uninitialised(name: str) -> bool:
    """Allocations whose values are whatever memory held (compared by shape and dtype only)."""
    base = name.split(".")[0]
    return base in UNINITIALISED or "empty" in base.split("::", 1)[1] or base in UNINITIALISED_TRIALS


class _Chosen(NamedTuple):
    """The first candidate CPU accepted: its plan, builder, CPU arguments and outputs."""

    plan: tuple
    build: Callable
    kwargs: dict
    expected: list
    written: list


def _untriable(category: str, reason: str, out: Verdict | None = None) -> Verdict:
    return (out or Verdict("untriable")).but(status="untriable", category=category, reason=reason)


def _choose(op, donors) -> _Chosen | Verdict:
    """The first candidate (donors' first) CPU runs, or the untriable verdict when none."""
    from jaxdev.audit import samples
    from jaxdev.audit.calls import invoke

    first_error = None
    no_cpu = True  # every candidate: "Could not run ... with arguments from the 'CPU' backend"
    try:
        for plan, build in itertools.chain(donor_candidates(op, donors), candidates(op)):
            try:
                kwargs, written = build("cpu", 0)
                samples.seed_all(0)
                expected = _outputs(invoke(op, kwargs), kwargs, written)
            except Unbuildable as e:
                return _untriable("argument", f"{UNTRIABLE['argument']}: {e}")
            except Exception as e:
                first_error = first_error or short(e)
                no_cpu = no_cpu and "from the 'CPU' backend" in str(e)
                continue
            return _Chosen(plan, build, kwargs, expected, written)
    except Exception as e:  # building itself failed in an unforeseen way
        return _untriable("argument", f"building the arguments raised {short(e)}")
    if first_error and no_cpu:
        reason = f"{UNTRIABLE['no_cpu_kernel']}: a kernel it calls has none ({first_error[:200]})"
        return _untriable("no_cpu_kernel", reason)
    return _untriable(
        "no_valid_sample", UNTRIABLE["no_valid_sample"] + (f" (first: {first_error})" if first_error else "")
    )


def _unstable(op, name: str, chosen: _Chosen) -> tuple[bool, set[int]]:
    """(random, unstable). Random ops (tagged nondeterministic_seeded) are compared by value only
    where two more CPU runs under other seeds agree with the first (dropout with p=0, an RNN without
    dropout): the values then do not depend on the generator. Outputs whose CPU values differ
    between runs are compared by shape and dtype only (all of them: `random`). One more run gets its
    out= tensors pre-filled with a sentinel: an output where some (not all) elements keep it was
    left partly unwritten (uninitialised memory on CPU) and is compared by shape and dtype only too.
    `unstable`: the leaves (of tree_flatten(outputs)) whose CPU values vary."""
    import torch
    from torch.utils._pytree import tree_flatten

    from jaxdev.audit import check, samples
    from jaxdev.audit.calls import invoke

    build, expected, written = chosen.build, chosen.expected, chosen.written
    random = _is_uninitialised(name) or name in DEVICE_RESULTS
    unstable: set[int] = set()
    seeds = (1, 2) if torch.Tag.nondeterministic_seeded in op.tags else (1,)
    expected_leaves = tree_flatten(expected)[0]
    for seed in () if random else seeds:
        try:
            kwargs2, _ = build("cpu", 0)
            samples.seed_all(seed)
            again = _outputs(invoke(op, kwargs2), kwargs2, written)
            random = check.differs(again, expected, 0.0, 0.0, values=False) is not None
            for i, (x, y) in enumerate(zip(tree_flatten(again)[0], expected_leaves)):
                if check.differs([x], [y], 0.0, 0.0) is not None:
                    unstable.add(i)
        except Exception:
            random = True
        if random:
            break
    if not random and any(is_out(a) for a in op._schema.arguments):
        with contextlib.suppress(Exception):
            kwargs2, _ = build("cpu", 0)
            _prefill_outs(op, kwargs2, written, expected)
            samples.seed_all(seeds[0])
            again = _outputs(invoke(op, kwargs2), kwargs2, written)
            for i, (x, y) in enumerate(zip(tree_flatten(again)[0], expected_leaves)):
                if _partly_sentinel(x) and check.differs([x], [y], 0.0, 0.0) is not None:
                    unstable.add(i)
    # Outputs CPU leaves partly unwritten by design: two runs may agree by chance (fresh zeroed pages)
    unstable |= set(PARTLY_UNWRITTEN.get(name.split(".")[0], ()))
    tensors = [i for i, x in enumerate(expected_leaves) if isinstance(x, torch.Tensor)]
    if not random and unstable and all(i in unstable for i in tensors):
        random, unstable = True, set()
    return random, unstable


def _on_device(op, chosen: _Chosen, out: Verdict, device) -> tuple | Verdict:
    """(outputs as CPU tensors, their layouts on the device, fallback ops), or the verdict of a raise.
    Built, run and read back inside the device's context (a peer's environment: devices.py). A raise
    in a step of the trial's own (building the arguments on the device, reading the results back)
    says so in its reason: the op itself did not raise it."""
    import warnings

    from torch.utils._pytree import tree_map

    from jaxdev.audit import calls, samples

    device.reset()
    step = f"building the arguments on {device.name}"
    with warnings.catch_warnings(), device.context():
        warnings.simplefilter("ignore")
        try:
            dev_kwargs, _ = chosen.build(device.name, 0)
            samples.seed_all(0)
            step = ""
            actual = _outputs(calls.invoke(op, dev_kwargs), dev_kwargs, chosen.written)
            step = "reading the results back to CPU"
            layouts = calls.layouts(actual)
            actual = tree_map(device.to_cpu, actual)
        except Exception as e:
            status = device.exception_status(e)
            fallback = device.fallback_ops()
            if status == "unsupported":
                return _untriable("unsupported", short(e), out)
            reason = f"outside the op, {step}: {short(e)}" if step else short(e)
            return out.but(status=status, reason=reason, fallback=fallback)
    return actual, layouts, device.fallback_ops()


def trial(name: str, on_phase: Callable[[str], None] = lambda phase: None, donors=()) -> Verdict:
    """The verdict of one overload tried directly: its status is an auditor status (facts.SEVERITY)
    or "untriable" (with a category from facts.aten.UNTRIABLE); it gives the dtype of the inputs and,
    where known, the repro, the donor, the fallback ops, the errors and whether it is random."""
    import torch
    from torch.utils._pytree import tree_flatten

    from jaxdev.audit import devices, samples
    from jaxdev.audit.schemas import overload

    op = overload(name)
    if op is None:
        return _untriable("python", UNTRIABLE["python"])
    on_phase("cpu")
    chosen = _choose(op, donors)
    if isinstance(chosen, Verdict):
        return chosen
    dtypes = [v.dtype for v in tree_flatten(chosen.kwargs)[0] if isinstance(v, torch.Tensor)]
    out = Verdict("pass", dtype=samples.dtype_name(dtypes[0]) if dtypes else "float32")
    out.repro = describe(name, chosen.plan, chosen.kwargs)
    if chosen.plan[0] == "donor":
        out.donor = f"arguments of {chosen.plan[1]} in OpInfo {chosen.plan[2]}'s sample"
    random, unstable = _unstable(op, name, chosen)
    out.random = random
    on_phase("jax")
    ran = _on_device(op, chosen, out, devices.current())
    if isinstance(ran, Verdict):
        return ran
    return _judge(name, out, ran, chosen.expected, random, unstable)


def _judge(name: str, out: Verdict, ran: tuple, expected, random: bool, unstable: set) -> Verdict:
    """The verdict on jax's outputs: `ran` is (outputs as CPU tensors, layouts on jax, fallback ops)."""
    from jaxdev.audit import check

    actual, layouts, fallback = ran
    out.fallback = fallback
    bad = check.differs(actual, expected, 0.0, 0.0, values=not random)
    if bad and unstable and not random:  # compare the stable outputs' values only
        bad = check.differs(actual, expected, 0.0, 0.0, values=False) or check.differs(
            _masked(actual, unstable), _masked(expected, unstable), 0.0, 0.0
        )
    gauge = ""
    if bad and bad.status == "wrong" and gauge_free(name, actual, expected):
        bad, gauge = None, GAUGE_NOTE
    if bad:
        if fallback:
            bad.reason += f" (CPU fallback used for {', '.join(fallback)})"
        return out.but(status=bad.status, reason=bad.reason, max_abs=bad.max_abs, max_rel=bad.max_rel)
    misplaced = check.stride_mismatch(layouts, expected)
    if misplaced:
        return out.but(status="stride_mismatch", reason=misplaced)
    if fallback:
        return out.but(status="fallback", reason=f"correct only through the CPU fallback for {', '.join(fallback)}")
    partly = (
        f"values of output(s) {sorted(unstable)} unchecked: they vary between CPU runs, or CPU leaves them "
        "partly unwritten"
        if unstable
        else ""
    )
    return out.but(status="pass", reason=UNCHECKED if random else "; ".join(x for x in (gauge, partly) if x))
