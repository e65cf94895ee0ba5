"""The raw bit dtypes (bits1x8, bits2x4, bits4x2, bits8, bits16) and float4_e2m1fn_x2 on jax: what CPU
serves them (making, zeroing, copying, cloning, concatenating, selecting, views) gives CPU's bytes, and
what needs arithmetic refuses in one sentence naming the dtype, as CPU refuses it. Before, every op on
them raised "JAX has no equivalent type", `zero_` and `torch.empty` included (PyTorch's test_torch)."""

from __future__ import annotations

import pytest
import torch

import jaxdev

RAW = [torch.bits1x8, torch.bits2x4, torch.bits4x2, torch.bits8, torch.bits16, torch.float4_e2m1fn_x2]


def carrier(dtype):
    return torch.uint8 if dtype.itemsize == 1 else torch.int16


def raw(device, dtype, *shape):
    """A tensor of `dtype` over seeded random bytes."""
    g = torch.Generator().manual_seed(sum(shape) + dtype.itemsize)
    values = torch.randint(0, 100, shape, generator=g, dtype=carrier(dtype))
    return values.to(device).view(dtype)


def as_bytes(t):
    assert t.dtype in RAW
    return t.view(carrier(t.dtype)).cpu()


OPS = {
    "empty": lambda d, dt: (lambda e: (e.shape, e.stride(), e._base is None))(torch.empty(3, 4, dtype=dt, device=d)),
    "empty_strided": lambda d, dt: torch.empty_strided((3, 4), (1, 3), dtype=dt, device=d).stride(),
    "zeros": lambda d, dt: torch.zeros(3, 4, dtype=dt, device=d),
    "zero_": lambda d, dt: raw(d, dt, 4, 3).t().zero_(),
    "clone of a transpose": lambda d, dt: raw(d, dt, 4, 3).t().clone(),
    "cpu": lambda d, dt: raw(d, dt, 4, 3).t().cpu(),
    "copy_ from a transpose": lambda d, dt: torch.empty(3, 4, dtype=dt, device=d).copy_(raw(d, dt, 4, 3).t()),
    "copy_ from CPU": lambda d, dt: torch.empty(3, 4, dtype=dt, device=d).copy_(raw("cpu", dt, 3, 4)),
    "copy_ to CPU": lambda d, dt: torch.empty(3, 4, dtype=dt).copy_(raw(d, dt, 3, 4)),
    "cat": lambda d, dt: torch.cat([raw(d, dt, 3, 4), raw(d, dt, 3, 4)]),
    # refused by CPU too: arithmetic, fills, conversions, copies between dtypes
    "fill_ 0": lambda d, dt: raw(d, dt, 3, 4).fill_(0),
    "ones": lambda d, dt: torch.ones(3, 4, dtype=dt, device=d),
    "add": lambda d, dt: raw(d, dt, 3, 4) + raw(d, dt, 3, 4),
    "to float": lambda d, dt: raw(d, dt, 3, 4).float(),
    "copy_ from the carrier": lambda d, dt: raw(d, dt, 3, 4).copy_(torch.zeros(3, 4, dtype=carrier(dt), device=d)),
    "sum": lambda d, dt: raw(d, dt, 3, 4).sum(),
}
# CPU's other byte movers (one carrier's programs are enough to show they are served)
MORE = {
    "stack": lambda d, dt: torch.stack([raw(d, dt, 3, 4), raw(d, dt, 3, 4)]),
    "index_select": lambda d, dt: raw(d, dt, 3, 4).index_select(0, torch.tensor([2, 0], device=d)),
    "where": lambda d, dt: torch.where(
        torch.tensor([True, False, True, False], device=d), raw(d, dt, 3, 4), raw(d, dt, 4, 3).t()
    ),
    "repeat": lambda d, dt: raw(d, dt, 3, 4).repeat(2, 1),
    "roll": lambda d, dt: raw(d, dt, 3, 4).roll(1, 0),
}


def _outcome(fn, device, dtype):
    try:
        r = fn(device, dtype)
    except (NotImplementedError, RuntimeError, TypeError) as e:
        return type(e)
    if isinstance(r, torch.Tensor):
        assert r.dtype == dtype
        return r.shape, r.stride(), as_bytes(r).tolist()
    return r


def _same_as_cpu(ops, dtype):
    for name, fn in ops.items():
        expected = _outcome(fn, "cpu", dtype)
        actual = _outcome(fn, "jax", dtype)
        if isinstance(expected, type):  # CPU's NotImplementedError; jax's RawBytesDtypeError is one
            assert isinstance(actual, type) and issubclass(actual, expected), name
        else:
            assert actual == expected, name


@pytest.mark.parametrize("dtype", RAW, ids=str)
def test_raw_dtypes_move_bytes_as_cpu_and_refuse_arithmetic(dtype):
    _same_as_cpu(OPS, dtype)


def test_other_byte_movers_as_cpu():
    _same_as_cpu(MORE, torch.bits8)


def test_refusal_names_the_dtype_in_one_sentence():
    x = torch.zeros(3, dtype=torch.bits8, device="jax")
    with pytest.raises(jaxdev.dtypes.RawBytesDtypeError, match=r"^dtype torch\.bits8 is not supported by this op"):
        x.fill_(1)
    with pytest.raises(NotImplementedError, match=r"between torch\.uint8 and torch\.bits8"):
        x.copy_(torch.zeros(3, dtype=torch.uint8, device="jax"))
    with pytest.raises(NotImplementedError):  # not a TypeError, which `==` would turn into False
        _ = x == x


def test_float4_compares_bytes_as_cpu():
    a = torch.tensor([0, 8, 1, 0x10], dtype=torch.uint8)
    b = torch.tensor([0, 0, 2, 0x10], dtype=torch.uint8)
    for op in (torch.eq, torch.ne):
        expected = op(a.view(torch.float4_e2m1fn_x2), b.view(torch.float4_e2m1fn_x2))
        actual = op(a.to("jax").view(torch.float4_e2m1fn_x2), b.to("jax").view(torch.float4_e2m1fn_x2))
        assert actual.cpu().tolist() == expected.tolist()


def test_deepcopy_and_storage_round_trip():
    import copy
    import io

    x = raw("jax", torch.bits16, 3, 4)
    assert as_bytes(copy.deepcopy(x)).tolist() == as_bytes(x).tolist()
    buffer = io.BytesIO()
    torch.save(x, buffer)
    buffer.seek(0)
    y = torch.load(buffer)
    assert (y.device.type, y.dtype, as_bytes(y).tolist()) == ("jax", torch.bits16, as_bytes(x).tolist())


def test_resize_growth_keeps_the_bytes_of_a_dtype_view():
    """Growing a dtype view of a storage kept none of its old values on jax (zeros); CPU copies the bytes."""
    for device in ("cpu", "jax"):
        x = torch.arange(4, dtype=torch.int16, device=device).view(torch.uint8)
        x.resize_(12)
        b = torch.arange(4, dtype=torch.uint8, device=device).view(torch.bits8)
        b.resize_(9)
        if device == "cpu":
            expected = (x[:8].tolist(), as_bytes(b)[:4].tolist())
    assert (x[:8].cpu().tolist(), as_bytes(b)[:4].tolist()) == expected


FLIPS = {
    # CPU copies whole rows: TensorIterator's innermost dim is not flipped and contiguous on both sides
    "rows of a matrix": lambda x: x.flip(0),
    "rows of a transpose": lambda x: x.t().flip(1),
    "the middle dim": lambda x: x.reshape(2, 3, 2).flip(1),
    "two outer dims": lambda x: x.reshape(2, 3, 2).flip(0, 1),
    "rows of a slice": lambda x: x[:, 1:3].flip(0),
    "nothing (a broadcast dim)": lambda x: x[:1].expand(3, 4).flip(0),
    "nothing (no dims)": lambda x: x.flip(()),
    "flipud": torch.flipud,
    # its per-dtype kernel, which refuses raw dtypes: the innermost dim flipped, or not contiguous
    "the last dim": lambda x: x.flip(1),
    "a column": lambda x: x[:, :1].flip(0),
    "rows of a strided slice": lambda x: x[:, ::2].flip(0),
    "fliplr": torch.fliplr,
    "rot90": torch.rot90,
    "a repeated dim": lambda x: x.flip(0, 0),
}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.bits8, torch.bits16], ids=str)
@pytest.mark.parametrize("flip", FLIPS.values(), ids=FLIPS.keys())
def test_flip_copies_rows_as_cpu_and_refuses_the_rest_in_its_words(flip, dtype):
    """CPU's flip serves a raw dtype where its loop copies whole rows (or flips nothing) and raises its
    per-dtype kernel's NotImplementedError elsewhere; jax refused every flip of one."""
    results = {}
    for d in ("cpu", "jax"):
        try:
            r = flip(raw(d, dtype, 3, 4))
            results[d] = (r.dtype, r.shape, r.stride(), as_bytes(r).tolist())
        except (NotImplementedError, RuntimeError) as e:
            results[d] = (NotImplementedError if isinstance(e, NotImplementedError) else type(e), str(e))
    assert results["jax"] == results["cpu"]


def _float4(d, *shape):
    return raw(d, torch.float4_e2m1fn_x2, *shape)


FLOAT4_CATS = {
    # CPU's serial cat kernel (dim > 0, contiguous inputs, a small result) has no float4 case
    "along dim 1": lambda d: torch.cat([_float4(d, 2, 3), _float4(d, 2, 3)], 1),
    "hstack": lambda d: torch.hstack([_float4(d, 2, 3), _float4(d, 2, 3)]),
    "stack along dim 1": lambda d: torch.stack([_float4(d, 3), _float4(d, 3)], 1),
    "channels_last along C": lambda d: torch.cat(
        [_float4(d, 1, 2, 2, 2).contiguous(memory_format=torch.channels_last)] * 2, 1
    ),
    # elsewhere it copies: dim 0, a non-contiguous input, a large result
    "along dim 0": lambda d: torch.cat([_float4(d, 2, 3), _float4(d, 2, 3)], 0),
    "a transposed input along dim 1": lambda d: torch.cat([_float4(d, 2, 2).t(), _float4(d, 2, 2)], 1),
    "a large result along dim 1": lambda d: torch.cat([_float4(d, 200, 100), _float4(d, 200, 100)], 1),
}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("cat", FLOAT4_CATS.values(), ids=FLOAT4_CATS.keys())
def test_float4_cat_as_cpu(cat):
    """CPU refuses float4_e2m1fn_x2's cat where its serial kernel would run (NotImplementedError, its
    words) and copies elsewhere; jax served every cat of it."""
    results = {}
    for d in ("cpu", "jax"):
        try:
            r = cat(d)
            results[d] = (r.shape, r.stride(), as_bytes(r).sum().item(), as_bytes(r).flatten()[:64].tolist())
        except NotImplementedError as e:
            results[d] = str(e)
    assert results["jax"] == results["cpu"]
