"""fill_ with a number, zero_ and threshold_ on tensors whose elements share memory (expanded, stride-0,
overlapping as_strided views): CPU writes them (its TensorIterator skips the overlap check for these
ops), and so does jax; fill_ with a tensor value and other in-place ops still refuse, as on CPU.

Found by PyTorch's own TestTorchDeviceType.test_deterministic_resize (empty_strided((10,), (0,)).fill_(0)),
which failed for all 15 dtypes on jax."""

import pytest
import torch
from jaxdev_testing import assert_same

pytestmark = pytest.mark.usefixtures("no_fallback")

MAKERS = {
    "expanded row": lambda d, dt: torch.arange(6, device=d).to(dt).reshape(1, 6).expand(4, 6),
    "stride-0 storage": lambda d, dt: torch.empty_strided((10,), (0,), device=d, dtype=dt),
    "two broadcast dims": lambda d, dt: torch.ones(3, 1, 1, device=d, dtype=dt).expand(3, 4, 5),
    "overlapping as_strided": lambda d, dt: torch.zeros(6, device=d, dtype=dt).as_strided((3, 2), (1, 1)),
    "transposed broadcast": lambda d, dt: torch.ones(1, 5, device=d, dtype=dt).expand(4, 5).t(),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool, torch.complex64])
@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
@pytest.mark.parametrize("op", ["fill_", "zero_"])
def test_fill_and_zero_write_shared_memory_as_cpu(make, dtype, op):
    value = True if dtype == torch.bool else 7
    results = {}
    for d in ("cpu", "jax"):
        t = make(d, dtype)
        base = t._base if t._base is not None else t
        out = t.fill_(value) if op == "fill_" else t.zero_()
        assert out is t
        results[d] = (t.clone(), base.clone(), t.stride())
    assert_same(results["jax"][0], results["cpu"][0])
    assert_same(results["jax"][1], results["cpu"][1])  # the base (every alias) sees the write
    assert results["jax"][2] == results["cpu"][2]


@pytest.mark.parametrize("view", ["neg", "conj"])
@pytest.mark.parametrize("op", ["fill_", "zero_"])
def test_negative_and_conjugate_views_still_raise_as_cpu(view, op):
    # PyTorch writes a neg/conj view through copy_, which checks the overlap
    for d in ("cpu", "jax"):
        t = torch.zeros(1, 3, device=d, dtype=torch.complex64)
        t = (t._neg_view() if view == "neg" else t.conj()).expand(2, 3)
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            t.fill_(2.5) if op == "fill_" else t.zero_()


@pytest.mark.parametrize(
    "write",
    [
        lambda t: t.fill_(torch.tensor(1.0, device=t.device)),
        lambda t: t.add_(1),
        lambda t: t.relu_(),
    ],
    ids=["fill_ with a tensor", "add_", "relu_"],
)
def test_other_in_place_writes_to_shared_memory_still_raise_as_cpu(write):
    for d in ("cpu", "jax"):
        t = torch.randn(1, 6, device=d).expand(6, 6)
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            write(t)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
def test_threshold_writes_shared_memory_as_cpu(make, dtype):
    """torch.nn.functional.threshold_ (PyTorch's TestNNDeviceType.test_threshold_inplace_overlap)."""
    results = {}
    for d in ("cpu", "jax"):
        t = make(d, dtype)
        if make is MAKERS["stride-0 storage"]:
            t.fill_(1)  # its memory is uninitialised
        base = t._base if t._base is not None else t
        assert torch.nn.functional.threshold_(t, 0.5, 9) is t
        results[d] = (t.clone(), base.clone())
    assert_same(results["jax"][0], results["cpu"][0])
    assert_same(results["jax"][1], results["cpu"][1])
