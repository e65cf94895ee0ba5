"""A compiled graph's call matched to a specialisation natively (jaxdev/csrc/graph_match.cpp): a key
matches exactly the calls whose full key (Inputs.key) is its specialisation's, and a matched call gives
the Python path's outputs, writes, version counters and aliasing."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import jaxdev  # noqa: F401
from jaxdev.graphs import inputs as graph_inputs
from jaxdev.graphs import program as graph_program
from jaxdev.graphs.program import GraphProgram

pytestmark = [
    pytest.mark.skipif(graph_inputs.native_match is None, reason="built without the native module"),
    pytest.mark.per_op_mode("a graph's own programs and plain boxes: fused eager traces a graph into its segment"),
]


def _r(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype, device="jax")


def _cases() -> list[list]:
    base, wide = _r(6, 4, dtype=torch.float64), _r(6, 4)
    return [
        [_r(4, 4), _r(4, 4), 3],
        [_r(4, 4), _r(4, 4), 4],  # another Python argument
        [_r(4, 4), _r(4, 4), 3.0],  # equal to 3: the same key, as in Python
        [wide[1:5], _r(4, 4), 3],  # another offset
        [_r(6, 4)[:4], _r(4, 4), 3],  # a bigger storage
        [_r(4, 4).t(), _r(4, 4), 3],  # other strides
        [torch._neg_view(_r(4, 4)), _r(4, 4), 3],  # the neg bit
        [_r(4, 4, dtype=torch.float64), _r(4, 4, dtype=torch.float64), 3],
        [base[:4], base[2:], 3],  # both on one storage
        [base[:4], base[:4], 3],  # one tensor twice
        [_r(4, 4), _r(4, 4), None],
    ]


def _key(args):
    inputs = graph_inputs.Inputs(list(args))
    statics = [None if isinstance(a, torch.Tensor) else a for a in args]
    shapes = [a.shape for a in inputs.arrays()]
    return inputs.key, graph_inputs.native_key(
        inputs.metas, statics, [(b.numel, b.dtype) for b in inputs.boxes], shapes
    )


def test_a_key_matches_the_calls_with_its_full_key_only():
    cases, later = _cases(), _cases()  # new tensors laid out as the first ones
    keys = [_key(args) for args in cases]
    for full, key in keys:
        for args in cases + later:
            got = graph_inputs.native_match(key, list(args))
            assert (got is not None) == (graph_inputs.Inputs(list(args)).key == full)
            if got is not None:
                arrays, boxes, firsts, same = got
                inputs = graph_inputs.Inputs(list(args))
                assert boxes == inputs.boxes and same
                assert [a is b.array for a, b in zip(arrays, boxes)] == [True] * len(boxes)
                assert [t.untyped_storage().data_ptr() for t in firsts] == [s.data_ptr() for s in inputs.storages]


def test_what_the_native_match_leaves_to_python():
    args = [_r(4, 4), _r(4, 4), 3]
    _, key = _key(args)
    assert graph_inputs.native_match(key, [args[0].cpu(), args[1], 3]) is None  # a CPU tensor
    assert graph_inputs.native_match(key, [args[0], args[1], torch.float32]) is None  # another Python type
    assert graph_inputs.native_match(key, args[:2]) is None  # fewer arguments
    assert graph_inputs.native_key([None], [torch.float32], [], []) is None  # a key Python must hold
    args[0].t().contiguous()  # no change to args[0]'s box; a reshaped array is matched, not the same shape
    box = graph_inputs.Inputs(list(args)).boxes[0]
    box.array = box.array.reshape(2, 8)
    arrays, _, _, same = graph_inputs.native_match(key, list(args))
    assert not same and arrays[0].shape == (2, 8)


def _writer(x, y, scale):
    x.mul_(scale)
    return x + y, x[1:], y.t()


def _program() -> GraphProgram:
    x = _r(4, 4)
    return GraphProgram(make_fx(lambda a, b: _writer(a, b, 2.0), tracing_mode="fake")(x, x.clone()), "inference")


@pytest.mark.parametrize("alias", [False, True])
def test_a_matched_call_is_the_python_paths_call(monkeypatch, alias):
    """Outputs (new, a view of a written input, a view of an input), the write, the version counter and
    the storages shared, call after call, with and without the native match."""
    results = {}
    for native in (True, False):
        monkeypatch.setattr(graph_program, "NATIVE_MATCH", native)
        torch.manual_seed(0)
        program, base = _program(), _r(8, 4)
        x, y = (base[:4], base[4:]) if alias else (_r(4, 4), _r(4, 4))
        runs = []
        for _ in range(3):
            before = x._version
            new, x_view, y_view = program([x, y])
            assert x_view.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
            assert y_view.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
            runs.append([t.cpu() for t in (new, x_view, y_view, x)] + [x._version - before])
        assert len(program.specialisations) == len(program.keys) == 1
        results[native] = runs
    for fast, slow in zip(results[True], results[False]):
        for a, b in zip(fast[:-1], slow[:-1]):
            assert torch.equal(a, b)
        assert fast[-1] == slow[-1] >= 1  # views of one base share its counter: bumped once per argument on it
