"""jaxdev/ops/copy.py: _assert_async and _lazy_clone against CPU PyTorch."""

from __future__ import annotations

import warnings

import pytest
import torch
from jaxdev_testing import CPU, JAX, assert_same

import jaxdev
from jaxdev import tensor
from jaxdev.graphs.program import EagerGraphWarning

# --- aten::_assert_async on jax: CPU's errors eagerly, and inside a compiled graph a deferred check, so the
# graph stays one program (the CPU fallback needed the value, and made the graph run op by op: the
# auditor's nn.functional.one_hot int64 compile cell was `untraced` for it).


CASES = [
    (torch.tensor(False), ()),
    (torch.tensor(False), ("boom",)),
    (torch.tensor(0.0), ()),
    (torch.tensor(2), ()),
    (torch.tensor(1 + 0j), ()),
    (torch.tensor([True, True]), ()),
    (torch.tensor([]), ()),
]


def _outcome(fn):
    try:
        fn()
    except RuntimeError as e:
        return str(e)
    return "ok"


@pytest.mark.per_op_mode("a failed check raises at the op; fused mode defers it to the sync")
@pytest.mark.parametrize(("x", "msg"), CASES)
def test_eager_assert_async_raises_what_cpu_raises_without_the_fallback(x, msg):
    jaxdev.reset_fallback_counts()
    want = _outcome(lambda: torch._assert_async(x, *msg))
    assert _outcome(lambda: torch._assert_async(x.to("jax"), *msg)) == want
    assert not jaxdev.fallback_counts()


def test_a_compiled_assert_is_one_program_and_its_failure_is_read_later():
    torch._dynamo.reset()
    fn = torch.compile(
        lambda x: torch._assert_async(x > 0, "x must be positive") or x * 2, backend="jax", fullgraph=True
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerGraphWarning)
        assert fn(torch.tensor(3.0, device="jax")).item() == 6.0
        y = fn(torch.tensor(-3.0, device="jax"))
    with pytest.raises(RuntimeError, match="x must be positive"):
        y.cpu()


def test_in_fused_mode_a_failed_assert_raises_at_the_sync():
    x = torch.tensor(-3.0, device="jax")
    with jaxdev.eager_mode("fused"):
        torch._assert_async(x > 0, "x must be positive")  # recorded: the value is not there yet
    with pytest.raises(RuntimeError, match="x must be positive"):
        torch.jax.synchronize()


aten = torch.ops.aten


# --- _lazy_clone: a copy-on-write clone on CPU ------------------------------------------------------------


@pytest.mark.usefixtures("no_fallback")
def test_lazy_clone_keeps_layout_and_copies():
    for d in (CPU, JAX):
        x = torch.arange(12.0, device=d).reshape(3, 4).requires_grad_()
        v = x.t()[1:]
        c = aten._lazy_clone(v)
        # CPU's lazy clone shares v's storage until a write: same sizes, strides and offset
        assert (c.shape, c.stride(), c.storage_offset()) == (v.shape, (1, 4), 1)
        assert c.untyped_storage().nbytes() == v.untyped_storage().nbytes()
        assert c.device == v.device
        assert_same(c.detach().to(JAX), v.detach().cpu())
        c.sum().backward()  # gradient flows through (LazyCloneBackward0)
        assert_same(x.grad.to(JAX), torch.ones(3, 4).index_fill_(1, torch.tensor([0]), 0))
        # writes to either side stay apart
        with torch.no_grad():
            x.add_(100)
        assert c.detach().cpu().tolist() == [[1.0, 5, 9], [2, 6, 10], [3, 7, 11]]
        c2 = aten._lazy_clone(x.detach())
        c2.mul_(2)
        assert x[0, :2].tolist() == [100.0, 101.0] and c2[0, :2].tolist() == [200.0, 202.0]


def test_lazy_clone_copies_no_bytes_until_a_write():
    """On jax the lazy clone's storage holds the very jax array of the original (arrays are immutable), as
    CPU's COW storage shares the original's memory; a write to either side gives it its own."""
    x = torch.arange(6.0, device=JAX).reshape(2, 3)
    c = aten._lazy_clone(x)
    assert tensor.box_of(c).array is tensor.box_of(x).array
    c.add_(1)
    x.mul_(10)
    assert (x.cpu().tolist(), c.cpu().tolist()) == ([[0, 10, 20], [30, 40, 50]], [[1, 2, 3], [4, 5, 6]])


_NUMBERS = [float("inf"), float("nan"), 1.5, 0.1, 2, True, 1 + 2j]
_DTYPES = [torch.float32, torch.float64, torch.int64, torch.bool, torch.complex64]


@pytest.mark.parametrize(
    ("value", "dtype"),
    # a complex number into a real tensor is left out: CPU warns and drops the imaginary part
    [(v, d) for v in _NUMBERS for d in _DTYPES if d.is_complex or not isinstance(v, complex)],
)
def test_copy_from_a_python_number_as_cpu(value, dtype):
    """x.copy_(number): the registered kernel gets the number itself (CPU's gets a wrapped 0-d tensor);
    jax raised AttributeError ('float' object has no attribute 'layout'): PyTorch's GradScaler test
    fills grads with param.grad.copy_(torch.inf)."""
    want = torch.zeros(3, dtype=dtype).copy_(value)
    got = torch.zeros(3, dtype=dtype, device=JAX).copy_(value)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, rtol=0, atol=0)


def test_local_scalar_dense_as_cpu():
    """CPU's kernel: an empty tensor raises its own message; a many-element tensor gives its first."""
    assert torch.ops.aten._local_scalar_dense(torch.tensor([[3.0, 4.0], [5.0, 6.0]], device=JAX)) == 3.0
    assert torch.ops.aten._local_scalar_dense(torch.arange(6, device=JAX).reshape(2, 3).t()[1]) == 1
    with pytest.raises(RuntimeError, match=r"^_local_scalar_dense: Empty tensor not supported$"):
        torch.ops.aten._local_scalar_dense(torch.randn(0, device=JAX))
