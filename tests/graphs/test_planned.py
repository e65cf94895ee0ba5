"""A compiled graph's intermediates are laid out as the graph was planned (jaxdev/graphs/planned.py),
even where a kernel and its meta function disagree (on torch 2.11 on an H200 the Transformer LM's
backward graph stopped tracing on a `view` and ran op by op)."""

import warnings

import pytest
import torch
import torch.nn.functional as F

import jaxdev  # noqa: F401
from jaxdev import layout
from jaxdev.graphs import planned

ATTENTION = torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default


def heads_attention(x):
    b, length, width = x.shape
    q = x.view(b, length, 4, width // 4).transpose(1, 2)  # (b, heads, L, d) over (b, L, heads, d) memory
    out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    # valid on the planned layout only (the meta function lays `out` out in the query's order of dims)
    return out.transpose(1, 2).view(b, length, width).sum(-1)


@pytest.fixture
def contiguous_attention(monkeypatch):
    """The attention kernel laying out its traced results contiguously, against its meta function."""
    real = layout.result_layouts

    def result_layouts(op, args, kwargs, traced):
        return None if op is ATTENTION and traced else real(op, args, kwargs, traced)

    monkeypatch.setattr(layout, "result_layouts", result_layouts)


def test_a_result_against_its_plan_is_laid_out_as_planned(contiguous_attention):
    torch._dynamo.reset()
    x = torch.randn(2, 8, 32)
    want = heads_attention(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an EagerGraphWarning (the graph run op by op) fails the test
        got = torch.compile(heads_attention, backend="jax")(x.to("jax"))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def test_without_the_plan_the_view_does_not_trace(contiguous_attention, monkeypatch):
    """The failure the plan prevents: the same graph with results left as the kernel laid them out."""
    torch._dynamo.reset()
    monkeypatch.setattr(planned, "as_planned", lambda node, out, seen: out)
    with pytest.warns(UserWarning, match="runs op by op"):  # other sizes: no program of the test above
        torch.compile(heads_attention, backend="jax")(torch.randn(3, 8, 32).to("jax"))


def test_views_are_not_copied():
    """A view of an input keeps its aliasing: an in-place write through it reaches the input."""
    torch._dynamo.reset()

    def write_through(x):
        x.t()[0].add_(1)
        return x

    x = torch.zeros(3, 2)
    got = torch.compile(write_through, backend="jax")(x.to("jax").clone())
    torch.testing.assert_close(got.cpu(), write_through(x.clone()))


def test_compiled_backward_graphs_do_not_nest_compiler_wrappers(monkeypatch):
    """Each graph gets a fresh AOTAutograd backend: torch's aot_autograd wraps a shared serializable
    bw_compiler in `_wrapped_bw_compiler` once more per graph, and a process that compiled ~490
    backward graphs (the coverage gate's workers) died with RecursionError."""
    from torch._dynamo.backends import common

    made = []
    real = common.aot_autograd

    def spy(**kwargs):
        backend = real(**kwargs)
        if "bw_compiler" in kwargs:
            made.append(kwargs["bw_compiler"])
        return backend

    monkeypatch.setattr(common, "aot_autograd", spy)
    for _ in range(5):
        torch._dynamo.reset()
        x = torch.randn(3, device="jax", requires_grad=True)
        torch.compile(lambda t: (t * 2).sin().sum(), backend="jax")(x).backward()
    assert x.grad is not None and made

    def depth(compiler) -> int:
        fn, n = getattr(compiler, "compiler_fn", compiler), 0
        while getattr(fn, "_is_wrapped_bw_compiler", False):
            n += 1
            fn = next(c.cell_contents for c in fn.__closure__ if callable(c.cell_contents))
        return n

    assert max(depth(c) for c in made) <= 1
