"""How a sample's op is called: eagerly (`call`, forward or backward, on any device), and on jax in
the directions that are not plain eager calls: through `torch.compile(backend="jax", fullgraph=True)`
(compile: the forward; compile-backward: the compiled forward, then torch.autograd.grad through the
backward graph AOTAutograd compiled with it) and in fused eager mode (fused). Each of those gives the
outputs as CPU tensors and their layouts on jax (check.run_sample judges them)."""

from __future__ import annotations

import contextlib
import functools

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map


class LostAutograd(Exception):
    """Outputs that have a grad_fn on CPU have none on jax."""


def call(op, sample, backward: bool, grad_outputs=None):
    """Forward: the op's outputs. Backward: (grads w.r.t. differentiable inputs, the seeds used):
    `grad_outputs` None draws the seeds (CPU tensors, seeded); given, they are CPU's, moved to the
    outputs' device, and an output count other than theirs is LostAutograd."""
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
            raise LostAutograd(
                f"{len(grad_outputs) - len(outs)} of {len(grad_outputs)} outputs have no grad_fn "
                f"(CPU's eager outputs have one)"
            )
    if not outs:
        return None, grad_outputs
    grads = torch.autograd.grad(outs, inputs, device_seeds, allow_unused=True)
    return grads, grad_outputs


def by_schema(op, named: dict) -> tuple[list, dict]:
    """An overload's arguments given by schema name (a direct trial's) as a user passes them:
    (positional, keyword). Each positional schema argument positionally, up to the last one given
    (one left out before it is given as its schema default, as the dispatcher passes it to a
    dispatch mode); keyword-only ones (out=, alpha=, dtype=) by keyword. The dispatcher takes either
    form, but a peer that intercepts the call in Python (torchax's function mode) sees what it is
    given. A name that is no positional argument, or one after a left-out argument with no
    default, goes by keyword."""
    args, kwargs, left_out = [], {}, []
    for a in op._schema.arguments:
        if a.name not in named:
            if not a.kwarg_only:
                left_out.append(a)
            continue
        if a.kwarg_only or kwargs or any(not x.has_default_value() for x in left_out):
            kwargs[a.name] = named[a.name]
            continue
        args += [x.default_value for x in left_out] + [named[a.name]]
        left_out = []
    kwargs.update((k, v) for k, v in named.items() if k not in kwargs and k not in _names(op))
    return args, kwargs


def _names(op) -> set:
    return {a.name for a in op._schema.arguments}


def invoke(op, named: dict):
    """The overload called on arguments given by schema name, as a user calls it (by_schema)."""
    args, kwargs = by_schema(op, named)
    return op(*args, **kwargs)


class Uncapturable(Exception):
    """torch.compile(fullgraph=True) cannot run the sample on CPU either: no backend could."""


def short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else ''}"


def to_cpu(x):
    return x.cpu() if isinstance(x, torch.Tensor) and x.device.type != "cpu" else x


def layouts(outputs) -> list:
    """(shape, strides) of each output leaf as the device made it (None for a non-tensor)."""
    leaves, _ = tree_flatten(outputs)
    return [(tuple(t.shape), t.stride()) if isinstance(t, torch.Tensor) else None for t in leaves]


def _compiled(op, backend: str):
    import torch._dynamo  # only compile-mode workers pay for importing dynamo

    torch._dynamo.reset()  # a fresh cache: every sample is its own compile, never a cache-limit hit

    def call(input, *args, **kwargs):
        return op(input, *args, **kwargs)

    return torch.compile(call, backend=backend, fullgraph=True)


def compiled(op, sample, fresh_sample) -> tuple[object, list]:
    """The op's outputs through torch.compile(backend="jax", fullgraph=True). When that raises,
    _whose_failure says whether any backend could have run it."""
    run = lambda backend, s: _compiled(op, backend)(s.input, *s.args, **s.kwargs)
    try:
        out = run("jax", sample)
    except Exception as e:
        _whose_failure(e, run, fresh_sample)
        raise
    return tree_map(to_cpu, out), layouts(out)


def compiled_backward(op, sample, seeds, fresh_sample) -> tuple[object, list]:
    """The grads w.r.t. the sample's differentiable inputs (CPU's seeds as grad outputs, as the eager
    backward direction takes them) when the forward runs through torch.compile(backend="jax",
    fullgraph=True): torch.autograd.grad then runs the backward graph AOTAutograd traced with the
    forward, compiled by the jax backend at the first backward. The sample's output_process_fn_grad
    runs eagerly on the compiled outputs, outside the graph, as it runs outside the op in eager mode.
    A failure in either graph is told apart as compiled() tells it (_whose_failure, on forward and
    backward both)."""
    run = lambda backend, s: call(_compiled(op, backend), s, True, seeds)[0]
    try:
        grads = run("jax", sample)
    except Exception as e:
        _whose_failure(e, run, fresh_sample)
        raise
    return tree_map(to_cpu, grads), layouts(grads)


def _unsupported(e: BaseException) -> BaseException | None:
    """The jaxdev.UnsupportedError behind `e` (torch.compile re-raises a failure `from` it), if any."""
    import jaxdev

    while e is not None and not isinstance(e, jaxdev.UnsupportedError):
        e = e.__cause__
    return e


def compiled_on_cpu(op, cpu_sample, seeds) -> tuple[object, list]:
    """What torch.compile itself gives the sample on CPU: the graphs AOTAutograd traces (the same the
    jax backend gets) run by CPU's eager kernels (as backend='aot_eager' runs them), each graph's
    outputs laid out as its meta says, as a backend that follows the graph's plan (jax's, inductor's)
    lays them out; eager kernels may not (float16 mul of an expanded scalar and a transposed tensor:
    (1, 2) eagerly, (2, 1) planned). The outputs, or with `seeds` (a backward direction) the grads,
    and their layouts."""
    if seeds is not None:
        out = call(_compiled(op, _planned_backend()), cpu_sample, True, seeds)[0]
    else:
        out = _compiled(op, _planned_backend())(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)
    return out, layouts(out)


@functools.cache
def _planned_backend():
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(fw_compiler=_as_planned, bw_compiler=_as_planned)


def _as_planned(gm, example_inputs):
    """An AOTAutograd compiler: the graph run eagerly, its outputs in the strides its meta plans."""
    from torch._functorch.aot_autograd import make_boxed_func

    output = next(n for n in gm.graph.nodes if n.op == "output")
    planned = [a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in output.args[0]]

    def run(*args):
        return [_laid_as(o, p) for o, p in zip(gm(*args), planned)]

    return make_boxed_func(run)


def _laid_as(out, planned):
    if not (isinstance(out, torch.Tensor) and isinstance(planned, torch.Tensor)) or out.layout != torch.strided:
        return out
    strides = planned.stride()
    if not all(isinstance(s, int) for s in strides) or tuple(out.stride()) == tuple(strides):
        return out
    return torch.empty_strided(out.shape, strides, dtype=out.dtype, device=out.device).copy_(out)


def _whose_failure(e: Exception, run, fresh_sample) -> None:
    """After `run("jax", sample)` raised `e`: the same run with AOTAutograd's reference backend tells
    whose failure it is. On CPU too -> Uncapturable (torch.compile itself cannot run it); on jax but
    not CPU -> the failure happens before jaxdev's backend runs, and the error says so (or is the
    UnsupportedError behind it: tensors jaxdev cannot hold fail any compile as they fail eagerly). Returns when
    both run: the failure is the jax backend's own (the caller re-raises `e`)."""
    try:
        run("aot_eager", fresh_sample("cpu"))
    except Exception as cpu_error:
        raise Uncapturable(short(cpu_error)) from None
    try:
        run("aot_eager", fresh_sample("jax"))
    except Exception:
        held = _unsupported(e)
        if held is not None:  # jaxdev cannot hold the tensors (complex32): that, not the compile, is the cause
            raise held from None
        raise RuntimeError(
            f"torch.compile fails on jax tensors before jaxdev's backend runs "
            f"(backend='aot_eager' too; CPU compiles): {short(e)}"
        ) from e


def fused(op, sample) -> tuple[object, list]:
    """The op's outputs in fused eager mode: recorded, then read inside the mode (the read runs the
    pending program), then torch.jax.synchronize() after leaving it (pending writes into the inputs
    run, deferred value checks are read). A value error that fused mode defers from the op to the
    flush or the sync is raised here, in the sample that caused it: the sample's exception, as the
    op's own is in per-op mode. When the sample raised anyway, its pending checks are read and
    dropped: left deferred, one would raise at the next sample's first read."""
    import jaxdev

    try:
        with jaxdev.eager_mode("fused"):
            out = op(sample.input, *sample.args, **sample.kwargs)
            laid = layouts(out)
            actual = tree_map(to_cpu, out)
    except BaseException:
        with contextlib.suppress(Exception):
            torch.jax.synchronize()
        raise
    torch.jax.synchronize()
    return actual, laid
