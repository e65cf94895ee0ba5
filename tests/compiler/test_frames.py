"""A compiled model breaks its graph where it would on CPU, and nowhere else: dynamo never traces into
JAX or jaxdev from the eager code between graphs (jaxdev/compiler/frames.py)."""

from __future__ import annotations

import pytest
import torch
from models import Transformer, batch
from torch._dynamo.utils import counters

from jaxdev.compiler import jax_backend
from jaxdev.core import strided


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _eager_backend(gm, example_inputs, **kwargs):
    return gm.forward


def _graphs_and_breaks(fn, args, backend, calls=2):
    """(graphs dynamo compiled, graph breaks it counted) for `fn(*args)` compiled with `backend`."""
    torch._dynamo.reset()
    counters.clear()
    graphs = []

    def counting(gm, example_inputs, **kwargs):
        graphs.append(gm)
        return backend(gm, example_inputs, **kwargs)

    compiled = torch.compile(fn, backend=counting)
    for _ in range(calls):
        compiled(*args)
    return len(graphs), sum(counters["graph_break"].values())


class _TwoLinears(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 13), torch.nn.Linear(13, 4)

    def forward(self, x):
        h = self.a(x).relu()
        h = h + h[1, 2].tolist()  # a float tolist() breaks the graph; it runs eagerly, then a new graph
        return self.b(h).sum()


def test_a_graph_break_whose_eager_code_compiles_jax_programs_breaks_as_on_cpu():
    """The eager tolist() reads a view JAX has not compiled a program for: JAX's compiler asks its
    logger whether debug is on, which dynamo used to compile as a frame of its own (a second break)."""
    want = _graphs_and_breaks(_TwoLinears(), (torch.randn(5, 8),), _eager_backend)
    strided._gather.cache_clear()  # the read's program is compiled afresh: JAX's compiler runs
    model = _TwoLinears().to("jax")
    got = _graphs_and_breaks(model, (torch.randn(5, 8, device="jax"),), jax_backend)
    assert got == want == (2, 1)


class _BrokenTransformer(Transformer):
    """The tests' GPT-like model (embedding, causal self-attention layer, head) with a print in the middle."""

    def forward(self, tokens):
        h = self.embed(tokens) + self.pos[: tokens.shape[1]]
        print("between the graphs")
        mask = torch.nn.Transformer.generate_square_subsequent_mask(tokens.shape[1], device=tokens.device)
        return self.out(self.norm(self.layer(h, src_mask=mask, is_causal=True)))


def test_a_transformer_with_a_print_breaks_as_on_cpu(capsys):
    torch.manual_seed(0)
    cpu = _BrokenTransformer().eval()
    tokens, _ = batch("transformer")
    want = _graphs_and_breaks(cpu, (tokens,), _eager_backend)
    strided._gather.cache_clear()
    got = _graphs_and_breaks(cpu.to("jax"), (tokens.to("jax"),), jax_backend)
    assert got == want and want[1] >= 1
    assert "between the graphs" in capsys.readouterr().out


def test_frames_of_jax_and_jaxdev_are_skipped_with_what_they_call():
    from torch._dynamo import convert_frame

    from jaxdev.compiler import frames

    wrapper = convert_frame.CatchErrorsWrapper.__call__
    roots = wrapper._jaxdev_roots
    assert frames.roots(["jax"])[0] in roots and frames.roots(["jaxdev.ops"])[0] in roots
    assert not any("/jaxdev/audit" in r or "/jaxdev/cli" in r for r in roots)  # traced like user code


def test_frames_skip_on_a_dynamo_without_skip_reasons(monkeypatch):
    """torch 2.11's ConvertFrameReturn has no `skip_reason` field (2.13's has): the skip must not pass it
    there (on an H200 with torch 2.11 every compiled step failed with a TypeError from this hook)."""
    import dataclasses
    import types

    from torch._dynamo import convert_frame
    from torch._dynamo import types as dynamo_types

    from jaxdev.compiler import frames

    @dataclasses.dataclass
    class OldReturn:  # the fields of torch 2.11's ConvertFrameReturn
        frame_exec_strategy: object = None
        apply_to_code: bool = True
        guarded_code: object = None

    class Wrapper:
        def __call__(self, frame, cache_entry, frame_state):
            return "compiled"

    monkeypatch.setattr(dynamo_types, "ConvertFrameReturn", OldReturn)
    monkeypatch.setattr(convert_frame, "CatchErrorsWrapper", Wrapper)
    assert frames.skip_recursively(["jax"])
    jax_file = frames.roots(["jax"])[0] + "numpy/__init__.py"
    frame = types.SimpleNamespace(f_code=types.SimpleNamespace(co_filename=jax_file))
    skipped = Wrapper()(frame, None, None)
    assert isinstance(skipped, OldReturn)
    assert skipped.frame_exec_strategy.recursive_action == dynamo_types.FrameAction.SKIP
    user = types.SimpleNamespace(f_code=types.SimpleNamespace(co_filename="/home/user/train.py"))
    assert Wrapper()(user, None, None) == "compiled"
