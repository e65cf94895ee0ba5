"""Binary ops refuse the operand dtypes CPU's kernels refuse, with CPU's error, where jnp would compute
something (complex lt, maximum, atan2; hypot of integers) or raise an error of its own (bitwise ops of
floats, copysign and hypot of complex)."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.usefixtures("no_fallback")

_OPS = ["maximum", "minimum", "fmax", "fmin", "bitwise_and", "bitwise_or", "bitwise_xor", "atan2", "hypot"]
_OPS += ["copysign", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]
_DTYPES = [torch.complex64, torch.float32, torch.bfloat16, torch.int32, torch.bool]


def _outcome(fn, *args):
    try:
        r = fn(*args)
    except Exception as e:
        return ("raised", type(e), str(e))
    return ("ok", r.dtype, r.cpu())


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
@pytest.mark.parametrize("name", _OPS)
def test_binary_ops_accept_and_refuse_dtypes_as_cpu_does(name, dtype):
    torch.manual_seed(0)
    a, b = (torch.randn(6) * 3).to(dtype), (torch.randn(6) * 3).to(dtype)
    fn = getattr(torch, name)
    for args in ((a, b), (a, 2)) if name in ("lt", "eq", "bitwise_and", "copysign") else ((a, b),):
        want = _outcome(fn, *args)
        got = _outcome(fn, *[x.to("jax") if isinstance(x, torch.Tensor) else x for x in args])
        assert got[:2] == want[:2], (got, want)
        if want[0] == "raised":
            assert got[2] == want[2]
        else:
            torch.testing.assert_close(got[2], want[2], equal_nan=True)
