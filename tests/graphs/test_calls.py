"""A graph program's call path: a later call finds its specialisation by where its tensors are (storages,
offsets) and one C++ check of their layouts, and gets a new one for any difference the full key holds;
outputs come back as the arguments themselves, as wrapped arrays in their own shape, or as views."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import jaxdev  # noqa: F401
from jaxdev import tensor
from jaxdev.graphs import inputs as graph_inputs
from jaxdev.graphs import program as graph_program
from jaxdev.graphs.program import GraphProgram

_OWN_PROGRAMS = "a graph's own programs, by layout: fused eager traces a graph into its segment's program"


def _f(a, b):
    return (a * 2 + b, a, (a + 1).t())


def _program() -> GraphProgram:
    x = torch.randn(4, 4, device="jax")
    return GraphProgram(make_fx(_f, tracing_mode="fake")(x, x.clone()), "forward", wrap_outputs=True)


def _check(program, a, b):
    got = program([a, b])
    want = _f(a.cpu(), b.cpu())
    for g, w in zip(got, want):  # values: a graph lays its results out as planned, not as its inputs'
        torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0)
    return got


def _layouts():
    def r(*shape, dtype=torch.float32):
        return torch.randn(*shape, dtype=dtype, device="jax")

    base = r(6, 4, dtype=torch.float64)
    return [
        (r(4, 4), r(4, 4)),
        (r(6, 4)[1:5], r(4, 4)),  # another offset, the same sizes and strides
        (r(4, 4).t(), r(4, 4)),  # other strides
        (torch._neg_view(r(4, 4)), r(4, 4)),  # the neg bit
        (r(4, 4, dtype=torch.float64), r(4, 4, dtype=torch.float64)),
        (base[:4], base[2:]),  # both on one storage
        (base[:4], base[:4]),  # one tensor twice
    ]


@pytest.mark.per_op_mode(_OWN_PROGRAMS)
def test_each_layout_gets_its_program_and_a_repeated_one_reuses_it():
    program = _program()
    for n, (a, b) in enumerate(_layouts(), start=1):
        _check(program, a, b)
        assert len(program.specialisations) == n
    for a, b in _layouts():  # new tensors laid out as before: no new program
        _check(program, a, b)
    assert len(program.specialisations) == len(_layouts())


@pytest.mark.per_op_mode(_OWN_PROGRAMS)
def test_offsets_on_device_storages_are_part_of_the_key():
    program = _program()
    big = torch.randn(6, 4, device="jax")
    _check(program, big[:4], torch.randn(4, 4, device="jax"))
    _check(program, big[2:], torch.randn(4, 4, device="jax"))  # the same sizes and strides, offset 8
    assert len(program.specialisations) == 2


def test_outputs_argument_and_view():
    program = _program()
    a, b = torch.randn(4, 4, device="jax"), torch.randn(4, 4, device="jax")
    new, same, view = program([a, b])
    assert same is a  # the graph returns its argument: the argument itself, as eagerly
    assert view.stride() == (1, 4)
    torch.testing.assert_close(new.cpu(), a.cpu() * 2 + b.cpu(), rtol=0, atol=0)


@pytest.mark.per_op_mode(_OWN_PROGRAMS)
def test_outputs_argument_wrapped_and_view():
    program = _program()
    a, b = torch.randn(4, 4, device="jax"), torch.randn(4, 4, device="jax")
    new, _, view = program([a, b])
    spec = next(iter(program.specialisations.values()))
    assert [o[0] for o in spec.outputs] == ["new", "arg", "new"] and spec.wrapped == [True, False]
    assert tensor.box_of(new).array.shape == (4, 4)  # in its own shape: a read reshapes nothing
    assert view.stride() == (1, 4)


@pytest.mark.per_op_mode(_OWN_PROGRAMS)
def test_a_guard_that_fails_under_another_dispatch_state_falls_back_to_the_key(monkeypatch):
    # the Python path's guards (a native key does not read the dispatch state: test_match.py)
    monkeypatch.setattr(graph_program, "NATIVE_MATCH", False)
    program = _program()
    a, b = torch.randn(4, 4, device="jax"), torch.randn(4, 4, device="jax")
    _check(program, a, b)
    for _ in range(3):
        with torch.inference_mode():  # the C++ check compares dispatch keys, which this state changes
            _check(program, torch.randn(4, 4, device="jax"), b)
        _check(program, a, b)
    assert len(program.specialisations) == 1
    assert [len(entries) for entries in program.guards.values()] == [2]  # one guard per dispatch state


def test_the_guard_cannot_tell_conj_bits_where_the_dispatch_state_hides_them():
    x = torch.randn(2, 2, dtype=torch.complex64)
    guard = graph_inputs.Guard.of([x])
    assert guard.passes([torch.randn(2, 2, dtype=torch.complex64)])
    assert not guard.passes([x.conj()])
    with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Conjugate)):
        assert not guard.passes([x])  # not trusted there: the call builds its full key
        assert graph_inputs.Guard.of([x]) is None


def test_the_native_placement_and_arrays_are_the_python_loops(monkeypatch):
    if graph_inputs._native_place is None:
        return  # built without the native module: the Python loops are all there is
    base = torch.randn(6, 4, device="jax")
    cases = [
        [base[:4], 3, base[2:], None, torch.randn(3, device="jax"), base.view(24), 2.5, True],
        [base.t(), torch._neg_view(base)],
        [base, torch.ones(2)],  # a CPU tensor: Python decides (the native loop says None)
        [base, torch.float32],  # a Python argument of another type: Python decides
    ]
    native = [graph_inputs.Inputs(list(args)) for args in cases]
    shapes = [[(1, a.size) for a in inputs.arrays()] for inputs in native]  # each reshaped, as after an eager read
    arrays = [inputs.arrays_as(s) for inputs, s in zip(native, shapes)]
    assert all(graph_inputs._native_place(args, graph_inputs._STATIC) is not None for args in cases[:2])
    assert graph_inputs._native_place(cases[2], graph_inputs._STATIC) is None
    assert graph_inputs._native_place(cases[3], graph_inputs._STATIC) is None
    monkeypatch.setattr(graph_inputs, "_native_place", None)
    monkeypatch.setattr(graph_inputs, "_native_arrays", None)
    for args, got, s, got_arrays in zip(cases, native, shapes, arrays):
        want = graph_inputs.Inputs(list(args))
        assert (got.placed, got.key, got.cpu.keys()) == (want.placed, want.key, want.cpu.keys())
        assert [(b.numel, b.dtype) for b in got.boxes] == [(b.numel, b.dtype) for b in want.boxes]
        assert [s.data_ptr() for s in got.storages] == [s.data_ptr() for s in want.storages]
        assert all(g is w for g, w in zip(got.tensors, want.tensors))
        assert [a.shape for a in got_arrays] == [a.shape for a in want.arrays_as(s)] == s


def test_the_native_view_is_tensor_on_storage():
    from jaxdev.graphs import outputs

    if outputs._native_view is None:
        return  # built without the native module: tensor_on_storage is all there is
    storage = torch.randn(6, 4, device="jax").untyped_storage()
    for layout in [(torch.float32, torch.Size([3, 4]), (1, 3), 2), (torch.int32, torch.Size([2, 2]), (2, 1), 0)]:
        got, want = outputs._native_view(storage, *layout), tensor.tensor_on_storage(storage, *layout)
        assert (got.dtype, got.shape, got.stride(), got.storage_offset()) == layout
        assert got.untyped_storage().data_ptr() == storage.data_ptr() and got._version == want._version == 0
        assert torch._C._dispatch_keys(got) == torch._C._dispatch_keys(want)
        assert torch.equal(got.cpu(), want.cpu())
    assert outputs._native_view(torch.ones(3).untyped_storage(), torch.float32, (3,), (1,), 0) is None
