"""How a sample's op is called on jax in the directions that are not plain eager calls: through
`torch.compile(backend="jax", fullgraph=True)` (compile) and in fused eager mode (fused). Each gives
the outputs as CPU tensors and their layouts on jax (check.run_sample judges them)."""

from __future__ import annotations

import contextlib

import torch
from torch.utils._pytree import tree_flatten, tree_map

import jaxdev


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
    """The op's outputs through torch.compile(backend="jax", fullgraph=True). When that raises, the
    same compile with AOTAutograd's reference backend tells whose failure it is: on CPU too ->
    Uncapturable (torch.compile itself cannot run it); on jax but not CPU -> the failure happens
    before jaxdev's backend runs, and the reason says so."""
    try:
        out = _compiled(op, "jax")(sample.input, *sample.args, **sample.kwargs)
    except Exception as e:
        try:
            cpu = fresh_sample("cpu")
            _compiled(op, "aot_eager")(cpu.input, *cpu.args, **cpu.kwargs)
        except Exception as cpu_error:
            raise Uncapturable(short(cpu_error)) from None
        try:
            dev = fresh_sample("jax")
            _compiled(op, "aot_eager")(dev.input, *dev.args, **dev.kwargs)
        except Exception:
            raise RuntimeError(
                f"torch.compile fails on jax tensors before jaxdev's backend runs "
                f"(backend='aot_eager' too; CPU compiles): {short(e)}"
            ) from e
        raise
    return tree_map(to_cpu, out), layouts(out)


def fused(op, sample) -> tuple[object, list]:
    """The op's outputs in fused eager mode: recorded, then read inside the mode (the read runs the
    pending program), then torch.jax.synchronize() after leaving it (pending writes into the inputs
    run, deferred value checks are read). A value error that fused mode defers from the op to the
    flush or the sync is raised here, in the sample that caused it: the sample's exception, as the
    op's own is in per-op mode. When the sample raised anyway, its pending checks are read and
    dropped: left deferred, one would raise at the next sample's first read."""
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
