"""torch.save/torch.load of jax tensors and state dicts; copy.deepcopy of modules on jax.

Saving reads a storage's bytes, which for a jax tensor are not in host memory: a wrong path
dereferences a fake pointer and kills the interpreter. These tests are `crashprone`: conftest runs
them in a child process first, so a crash fails the test instead of the whole suite.
"""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
from jaxdev_testing import JAX, assert_same

pytestmark = pytest.mark.crashprone


def _round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))


def test_save_load_tensor_stays_on_jax():
    cpu = torch.tensor([[1.5, -2.0], [3.0, 4.25]])
    loaded = _round_trip(cpu.to("jax"))
    assert loaded.device == JAX
    assert_same(loaded, cpu)


def test_save_load_every_dtype():
    tensors = {
        str(dt): torch.tensor([0, 1, 1], dtype=dt) if dt == torch.bool else torch.tensor([1, 2, 3], dtype=dt)
        for dt in (
            torch.bool,
            torch.uint8,
            torch.int8,
            torch.int16,
            torch.int32,
            torch.int64,
            torch.float16,
            torch.bfloat16,
            torch.float32,
            torch.float64,
            torch.complex64,
            torch.complex128,
        )
    }
    loaded = _round_trip({k: v.to("jax") for k, v in tensors.items()})
    for k, v in tensors.items():
        assert_same(loaded[k], v, msg=k)


def test_map_location_cpu():
    cpu = torch.arange(6.0).reshape(2, 3)
    loaded = _round_trip(cpu.to("jax"), map_location="cpu")
    assert loaded.device.type == "cpu"
    assert torch.equal(loaded, cpu)


def test_map_location_jax_from_cpu_save():
    cpu = torch.arange(6.0).reshape(2, 3)
    loaded = _round_trip(cpu, map_location="jax")
    assert_same(loaded, cpu)
    loaded = _round_trip(cpu, map_location=torch.device("jax", 0))
    assert_same(loaded, cpu)


def test_state_dict_round_trip_and_load_into_module():
    model = _model().to("jax")
    reference = {k: v.cpu() for k, v in model.state_dict().items()}
    state = _round_trip(model.state_dict())
    for k, v in state.items():
        assert_same(v, reference[k], msg=k)
    fresh = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2)).to("jax")
    fresh.load_state_dict(state)
    for k, v in fresh.state_dict().items():
        assert_same(v, reference[k], msg=k)
    on_cpu = _round_trip(model.state_dict(), map_location="cpu")
    for k, v in on_cpu.items():
        assert v.device.type == "cpu" and torch.equal(v, reference[k]), k


def test_save_preserves_view_sharing_like_cpu():
    """Views saved together share storage after loading, as on CPU."""
    base = torch.arange(6.0, device="jax")
    loaded_base, loaded_view = _round_trip([base, base[2:5]])
    assert_same(loaded_view, torch.arange(2.0, 5.0))
    loaded_view.fill_(-1)
    assert_same(loaded_base, torch.tensor([0.0, 1.0, -1.0, -1.0, -1.0, 5.0]))


def test_save_non_contiguous_view():
    x = torch.arange(12.0).reshape(3, 4)
    loaded = _round_trip(x.to("jax").t()[1:])
    assert_same(loaded, x.t()[1:])


def test_pickle_round_trip():
    t = torch.tensor([1.0, 2.0], device="jax")
    loaded = pickle.loads(pickle.dumps(t))
    assert_same(loaded, torch.tensor([1.0, 2.0]))


def test_deepcopy_tensor_is_independent():
    t = torch.arange(4.0, device="jax")
    c = copy.deepcopy(t)
    assert_same(c, torch.arange(4.0))
    c.add_(1)
    assert_same(t, torch.arange(4.0))


def test_deepcopy_keeps_view_relationship_like_cpu():
    base = torch.arange(4.0, device="jax")
    new_base, new_view = copy.deepcopy([base, base[1:3]])
    new_view.fill_(9)
    assert_same(new_base, torch.tensor([0.0, 9.0, 9.0, 3.0]))
    assert_same(base, torch.arange(4.0))


def test_deepcopy_module_on_jax():
    model = _model().to("jax")
    clone = copy.deepcopy(model)
    for (name, a), (_, b) in zip(model.state_dict().items(), clone.state_dict().items()):
        assert b.device == JAX, name
        assert_same(b, a.cpu(), msg=name)
    with torch.no_grad():
        clone[0].weight.add_(1)
    assert not torch.equal(clone[0].weight.cpu(), model[0].weight.cpu()), "deepcopy shares parameters"
    x = torch.ones(2, 3, device="jax")
    model.eval()
    assert_same(model(x), _model().eval()(torch.ones(2, 3)), rtol=1e-6, atol=1e-6)


def test_storage_copy_to_cpu():
    t = torch.tensor([1.0, 2.0], device="jax")
    storage = t.untyped_storage().cpu()
    assert torch.equal(torch.tensor([], dtype=torch.float32).set_(storage), torch.tensor([1.0, 2.0]))
