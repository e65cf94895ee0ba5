"""jaxdev/ops/kit/derived.py: in-place and out= variants derived from functional kernels (resizing rules)."""

from __future__ import annotations

import warnings

import pytest
import torch
from jaxdev_testing import JAX

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


def test_in_place_out_that_is_an_input_is_not_resized():
    """x.ldexp_(y) is mul(x, 2**y, out=x): CPU raises rather than grow x to the broadcast shape."""
    x = torch.ones(5, 1, device=JAX)
    with pytest.raises(RuntimeError, match=r"output with shape \[5, 1\] doesn't match the broadcast shape \[5, 5\]"):
        x.ldexp_(torch.ones(5, 5, device=JAX))
    assert x.shape == (5, 1)
    # An out= that is not an input still resizes (with PyTorch's deprecation warning).
    out = torch.empty(5, 1, device=JAX)
    with pytest.warns(UserWarning, match="was resized"):
        torch.mul(x, torch.ones(5, 5, device=JAX), out=out)
    assert out.shape == (5, 5)


def _cl(d):
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 3, 4, 6, generator=g).to(d).contiguous(memory_format=torch.channels_last)


def _t(d):
    g = torch.Generator().manual_seed(1)
    return torch.randn(5, 4, generator=g).to(d).t()


def _e(d, dtype=torch.float32):
    return torch.empty(0, device=d, dtype=dtype)


# out= given as an empty tensor: CPU restrides it as the functional result lies (structured kernels,
# TensorIterator), except where its out= kernel resizes contiguous (isin, flip, native_batch_norm)
RESIZED_OUT = {
    "sort of a transpose": lambda d: torch.sort(_t(d), 1, out=(_e(d), _e(d, torch.long))),
    "upsample_nearest2d channels_last": lambda d: torch._C._nn.upsample_nearest2d(_cl(d), (8, 12), out=_e(d)),
    "avg_pool2d channels_last": lambda d: torch._C._nn.avg_pool2d(_cl(d), 2, out=_e(d)),
    "max_pool2d_with_indices channels_last": lambda d: torch._C._nn.max_pool2d_with_indices(
        _cl(d), 2, out=(_e(d), _e(d, torch.long))
    ),
    "polar channels_last": lambda d: torch.polar(_cl(d), _cl(d), out=_e(d, torch.complex64)),
    "glu channels_last": lambda d: torch._C._nn.glu(_cl(d), 3, out=_e(d)),
    "reflection_pad2d channels_last": lambda d: torch._C._nn.reflection_pad2d(_cl(d), 1, out=_e(d)),
    "isin of a transpose (contiguous)": lambda d: torch.isin(_t(d), _t(d)[0], out=_e(d, torch.bool)),
    "flip of a transpose (contiguous)": lambda d: torch.ops.aten.flip.out(_t(d), [0], out=_e(d)),
    "a right-sized transposed out keeps its strides": lambda d: torch.sort(
        _t(d), 1, out=(torch.empty(5, 4, device=d).t(), torch.empty(5, 4, device=d, dtype=torch.long).t())
    ),
}


@pytest.mark.parametrize("call", RESIZED_OUT.values(), ids=RESIZED_OUT.keys())
def test_a_resized_out_is_laid_out_as_cpu(call):
    """jax resized every non-pointwise out= contiguous (sort, pools, upsampling, padding of channels_last
    or transposed inputs)."""
    expected, actual = call("cpu"), call(JAX)
    for e, a in zip(expected, actual) if isinstance(expected, tuple) else [(expected, actual)]:
        assert (a.shape, a.stride()) == (e.shape, e.stride())
        torch.testing.assert_close(a.cpu(), e)


@pytest.mark.parametrize(
    ("call", "dtype"),
    [
        (lambda d, out: torch.multinomial(torch.tensor([0.2, 0.3, 0.5], device=d), 2, out=out), torch.long),
        (lambda d, out: torch._C._nn.log_sigmoid(torch.tensor([-1.0, 0.0, 2.0], device=d), out=out), torch.float32),
    ],
    ids=["multinomial", "log_sigmoid"],
)
def test_out_resized_silently_where_cpu_kernel_uses_resize_(call, dtype):
    """CPU's multinomial and log_sigmoid out= kernels resize a non-empty out without resize_output's
    deprecation warning (PyTorch's test_out_warning xfails them); jax warned."""
    shapes = {}
    for d in ("cpu", JAX):
        out = torch.empty(1, dtype=dtype, device=d)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call(d, out)
        assert [str(w.message) for w in caught if "resized" in str(w.message)] == [], d
        shapes[d] = out.shape
    assert shapes["cpu"] == shapes[JAX] != (1,)
