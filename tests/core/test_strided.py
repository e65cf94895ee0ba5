"""Reading and writing through strides (jaxdev/core/strided.py): a view's values gathered from its
storage's box, or read inside a kernel's own program (read_parts), and writes through a view —
`x[idx] = v`, index_put_, copy_ into slices, out= — scattered back so the base and every alias see them;
the structured plans (GRID/SLICED/PADDED) and the gather fallback against CPU at random strides and
offsets.

Each scenario runs on CPU and on jax (`on_both`), and every tensor it returns — base, views,
siblings — must hold the same values (and, where asked, the same strides) on both.
"""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import pytest
import torch
from jaxdev_testing import JAX, on_both

from jaxdev import tensor


def test_reading_expanded_and_overlapping_views():
    def scenario(device):
        x = torch.arange(6.0, device=device)
        windows = x.as_strided((4, 3), (1, 1))
        e = x[:2].unsqueeze(1).expand(2, 5)
        return windows, e, windows.sum(1), e * 2, windows.clone(), e.contiguous()

    on_both(scenario)


# Views passed to kernels are read inside the kernel's own program (kit.on_views): the transpose of
# a Linear's weight fuses into its product instead of being copied first.
FUSED_READS = {
    "t() sum": lambda t: t.t().sum(0),
    "slice exp": lambda t: t[:, ::2].exp(),
    "expand + self": lambda t: t[:1].expand(5, 7) + t,
    "softmax of t()": lambda t: torch.softmax(t.t(), -1),
    "diagonal * 2": lambda t: t.diagonal() * 2,
    "mm with t()": lambda t: t @ t.t(),
    "linear": lambda t: torch.nn.functional.linear(t, t[:3], t[0, :3]),
    "addmm of views": lambda t: torch.addmm(t[:, :5], t, t.t()[:, :5]),
    "offset slice + 1": lambda t: t[2:, 1:] + 1,
    "bmm of views": lambda t: torch.bmm(t.view(1, 5, 7), t.t().reshape(1, 7, 5)),
    "mean of t()": lambda t: t.t().mean(1),
    "integer view": lambda t: (t * 10).long().t()[::2] * 3,
    "bool expand": lambda t: (t > 0)[:1].expand(5, 7) & (t < 1),
    "overlapping windows": lambda t: t.reshape(-1).as_strided((4, 4), (1, 1)).sum(1),
    "conj view": lambda t: (t + 1j).conj() * 2,
    "view(dtype)": lambda t: t.view(torch.int32)[:, ::3] + 1,
    # XLA's CPU dot has no bf16 x bf16 -> f32 kernel for this layout (nn.functional.bilinear's backward)
    "bfloat16 bmm of a transposed view": lambda t: torch.bmm(
        t[:3].bfloat16().reshape(1, 3, 7).transpose(1, 2), t[:3, :4].bfloat16().reshape(1, 3, 4)
    ),
}


@pytest.mark.parametrize("name", list(FUSED_READS))
def test_views_read_inside_the_kernels_program(name):
    x = torch.randn(5, 7)
    on_both(lambda d: FUSED_READS[name](x.to(d)), rtol=1e-6, atol=1e-6, check_stride=True)


def test_a_transposed_weight_is_read_inside_the_product():
    from jaxdev import tensor

    w = torch.randn(4, 6, device="jax")
    array, offset, recipe = tensor.read_parts(w.t())
    assert recipe is not None and array.shape == (4, 6) and offset is None  # the storage, not a copy; offset 0 static
    assert tensor.read_parts(w)[2] is None

    def step(x, w):
        return torch.nn.functional.linear(x, w).relu().sum()

    x = torch.randn(3, 6)
    compiled = torch.compile(step, backend="jax", fullgraph=True)
    expected = step(x, w.cpu())
    assert torch.allclose(compiled(x.to("jax"), w).cpu(), expected, rtol=1e-5)


# --- x[idx] = v, index_put_, copy_ into slices, out= ---------------------------------------------


SETITEM = {
    "int": lambda x, d: x.__setitem__(1, 5.0),
    "slice_tensor": lambda x, d: x.__setitem__((slice(None), 0), torch.tensor([1.0, 2.0, 3.0], device=d)),
    "slice_cpu_tensor": lambda x, d: x.__setitem__((slice(None), 0), torch.tensor([1.0, 2.0, 3.0])),
    "ellipsis_scalar": lambda x, d: x.__setitem__((Ellipsis, 1), -3.0),
    "step": lambda x, d: x.__setitem__((slice(None, None, 2), slice(1, None, 2)), 9.0),
    "bool_mask": lambda x, d: x.__setitem__(x > 5, 0.0),
    "bool_mask_values": lambda x, d: x.__setitem__(x > 8, torch.tensor([-1.0, -2.0, -3.0], device=d)),
    "int_list": lambda x, d: x.__setitem__([0, 2], torch.tensor([[1.0, 1.0, 1.0, 1.0]], device=d)),
    "index_tensor": lambda x, d: x.__setitem__(torch.tensor([2, 0], device=d), 4.0),
    "cpu_index_tensor": lambda x, d: x.__setitem__(torch.tensor([2, 0]), 4.0),
    "two_index_tensors": lambda x, d: x.__setitem__(
        (torch.tensor([0, 2], device=d), torch.tensor([1, 3], device=d)), torch.tensor([-7.0, -8.0], device=d)
    ),
    "mixed_slice_and_index": lambda x, d: x.__setitem__((slice(1, None), torch.tensor([0, 3], device=d)), 0.5),
    "none": lambda x, d: x.__setitem__((None, 1), 2.0),
    "zero_dim_value": lambda x, d: x.__setitem__(0, torch.tensor(6.0, device=d)),
    "broadcast_row": lambda x, d: x.__setitem__(slice(0, 2), torch.arange(4.0, device=d)),
}


@pytest.mark.parametrize("name", list(SETITEM))
def test_setitem_changes_base_and_views(name):
    def scenario(device):
        x = torch.arange(12.0, device=device).reshape(3, 4)
        view = x.t()
        sibling = x[1]
        version = x._version
        SETITEM[name](x, device)
        return x, view, sibling, x._version > version

    on_both(scenario)


@pytest.mark.parametrize("name", ["int", "slice_tensor", "bool_mask", "index_tensor", "two_index_tensors"])
def test_setitem_on_a_view_changes_base(name):
    def scenario(device):
        base = torch.arange(24.0, device=device).reshape(2, 3, 4)
        view = base[1]
        SETITEM[name](view, device)
        return base, view

    on_both(scenario)


def test_augmented_assignment_on_slice():
    def scenario(device):
        x = torch.arange(12.0, device=device).reshape(3, 4)
        x[1:] += 1
        x[:, ::3] *= -2
        x[x < 0] -= 100
        return x

    on_both(scenario)


def test_index_put_and_accumulate():
    def scenario(device):
        x = torch.zeros(5, device=device)
        view = x[1:]
        idx = torch.tensor([0, 2, 0, 3], device=device)
        vals = torch.tensor([1.0, 2.0, 3.0, 4.0], device=device)
        a = x.clone().index_put_((idx,), vals, accumulate=True)
        view.index_put_((torch.tensor([1, 2], device=device),), torch.tensor([9.0, 8.0], device=device))
        x.index_put_((torch.tensor([0], device=device),), torch.tensor(5.0, device=device), accumulate=True)
        b = torch.index_put(x, (idx,), vals, accumulate=True)
        return x, view, a, b

    on_both(scenario)


def test_index_put_2d_with_bool_and_broadcast():
    def scenario(device):
        x = torch.arange(12.0, device=device).reshape(3, 4)
        mask = torch.tensor([True, False, True], device=device)
        x.index_put_((mask,), torch.tensor([-1.0, -2.0, -3.0, -4.0], device=device))
        x.t().index_put_((torch.tensor([1], device=device),), torch.tensor(0.0, device=device))
        return x

    on_both(scenario)


def test_index_fill_copy_add_through_views():
    def scenario(device):
        x = torch.arange(12.0, device=device).reshape(3, 4)
        idx = torch.tensor([0, 2], device=device)
        x[:, 1:].index_fill_(1, idx, -1.0)
        x.t().index_copy_(0, torch.tensor([3], device=device), torch.full((1, 3), 5.0, device=device))
        x[1:].index_add_(0, torch.tensor([1, 1], device=device), torch.ones(2, 4, device=device))
        x.masked_fill_(x > 9, 0.0)
        return x

    on_both(scenario)


def test_copy_into_slices():
    def scenario(device):
        x = torch.zeros(4, 5, device=device)
        x[1:3, 2:].copy_(torch.arange(6.0).reshape(2, 3))  # from CPU
        x.t()[::2, 0].copy_(torch.tensor([7.0, 8.0, 9.0], device=device))
        x.diagonal().copy_(torch.full((4,), -1.0, device=device))
        x[3].copy_(torch.tensor(2, dtype=torch.int64, device=device))  # broadcast + dtype conversion
        x[:, 4].copy_(x[:, 0])  # jax -> jax, both views
        return x

    on_both(scenario)


OUT_OPS = {
    "add": lambda d, out: torch.add(torch.ones(2, 3, device=d), torch.arange(3.0, device=d), out=out),
    "mul_scalar": lambda d, out: torch.mul(torch.arange(6.0, device=d).reshape(2, 3), 2, out=out),
    "sin": lambda d, out: torch.sin(torch.arange(6.0, device=d).reshape(2, 3), out=out),
    "sum_dim": lambda d, out: torch.sum(torch.arange(12.0, device=d).reshape(2, 3, 2), dim=2, out=out),
    "matmul": lambda d, out: torch.matmul(
        torch.ones(2, 4, device=d), torch.arange(12.0, device=d).reshape(4, 3), out=out
    ),
    "where": lambda d, out: torch.where(
        torch.tensor([[True, False, True]] * 2, device=d), 1.0, torch.zeros(2, 3, device=d), out=out
    ),
    "clamp": lambda d, out: torch.clamp(torch.arange(6.0, device=d).reshape(2, 3), 1, 4, out=out),
}


@pytest.mark.parametrize("name", list(OUT_OPS))
@pytest.mark.parametrize("target", ["row_block", "transposed"])
def test_out_into_view_changes_base(name, target):
    def scenario(device):
        if target == "row_block":
            base = torch.full((4, 3), -9.0, device=device)
            view = base[1:3]
        else:  # a (2, 3) view with strides (1, 4)
            base = torch.full((3, 4), -9.0, device=device)
            view = base.t()[1:3]
        version = base._version
        result = OUT_OPS[name](device, view)
        return base, view, result is view, base._version > version

    on_both(scenario)


def test_out_resizes_empty_tensor_and_checks_dtype_like_cpu():
    def resize(device):
        out = torch.empty(0, device=device)
        torch.add(torch.ones(2, 2, device=device), 1, out=out)
        return out

    def bad_dtype(device):
        out = torch.empty(2, dtype=torch.int64, device=device)
        torch.add(torch.ones(2, device=device), 0.5, out=out)

    def ok_dtype(device):
        out = torch.empty(2, dtype=torch.float64, device=device)
        torch.add(torch.ones(2, dtype=torch.int32, device=device), 1, out=out)
        return out

    on_both(resize)
    on_both(bad_dtype, match="can't be cast to the desired output type")
    on_both(ok_dtype)


def _random_view(x, rs):
    """A chain of 1-3 view ops chosen by `rs` (transpose, permute, strided slice, expand, diagonal,
    select, unfold): the strides the structured read/write plans and the gather fallback must cover."""
    for _ in range(rs.randint(1, 3)):
        if x.dim() == 0:
            break
        kind = rs.choice(["t", "perm", "slice", "expand", "diag", "select", "unfold"])
        if kind == "t" and x.dim() >= 2:
            x = x.transpose(0, x.dim() - 1)
        elif kind == "perm":
            p = list(range(x.dim()))
            rs.shuffle(p)
            x = x.permute(p)
        elif kind == "slice":
            d = rs.randrange(x.dim())
            n = x.shape[d]
            if n:
                a = rs.randrange(n)
                x = x[(slice(None),) * d + (slice(a, rs.randint(a, n), rs.randint(1, 3)),)]
        elif kind == "expand" and x.dim() < 4:
            x = x.unsqueeze(0).expand(3, *x.shape)
        elif kind == "diag" and x.dim() >= 2:
            x = x.diagonal(rs.randint(-1, 1), 0, 1)
        elif kind == "select":
            d = rs.randrange(x.dim())
            if x.shape[d]:
                x = x.select(d, rs.randrange(x.shape[d]))
        elif kind == "unfold" and x.shape[-1] >= 2:
            x = x.unfold(-1, 2, rs.randint(1, 2))
    return x


def test_random_views_read_and_write_like_cpu():
    import random

    rs = random.Random(0)
    for _ in range(300):
        shape = [rs.randint(1, 5) for _ in range(rs.randint(1, 3))]
        base_cpu = torch.randn(shape)
        base_jax = base_cpu.to(JAX)
        state = rs.getstate()
        view_cpu = _random_view(base_cpu, rs)
        rs.setstate(state)
        view_jax = _random_view(base_jax, rs)
        assert view_jax.stride() == view_cpu.stride()
        assert torch.equal(view_jax.cpu(), view_cpu), (shape, view_cpu.stride())
        # Writes where each element has one address (overlapping unfold windows are written in an
        # unspecified order on any device, and stride-0 views are refused, as tested elsewhere).
        if torch._debug_has_internal_overlap(view_cpu) == 0:
            src = torch.randn(view_cpu.shape)
            view_cpu.copy_(src)
            view_jax.copy_(src.to(JAX))
            assert torch.equal(base_jax.cpu(), base_cpu), (shape, view_cpu.stride())


def test_structured_views_at_every_offset_read_and_write_like_cpu():
    """Strided views at random offsets of a storage, through as_strided: each is read and written as
    one slice of the storage reshaped (GRID), a block (WHOLE/SLICED/PADDED) or the index gather, and
    every way agrees with CPU (the digits of an offset decide GRID, so the offsets are drawn widely)."""
    import random

    rs = random.Random(1)
    seen = collections.Counter()
    for _ in range(400):
        numel = rs.choice([24, 60, 64, 120, 128])
        base_cpu = torch.arange(numel, dtype=torch.float32)
        base_jax = base_cpu.to(JAX) + 0  # a buffer XLA owns: writes may be donated
        # Nested strides (each a multiple of the next, windows not overlapping), as slices,
        # transposes and selects of a dense tensor make them.
        inner = rs.choice([1, 1, 2, 3])
        sizes, strides, step = [], [], inner
        for _ in range(rs.randint(1, 3)):
            n = rs.randint(1, 4)
            sizes.append(n)
            strides.append(step)
            step *= n + rs.randint(0, 2)
        order = list(range(len(sizes)))
        rs.shuffle(order)
        sizes, strides = [sizes[i] for i in order], [strides[i] for i in order]
        span = 1 + sum((n - 1) * s for n, s in zip(sizes, strides))
        if span > numel:
            continue
        offset = rs.randrange(numel - span + 1)
        box = tensor.box_of(base_jax)
        recipe = tensor.view_recipe(tuple(sizes), tuple(strides), torch.float32, box.numel, box.dtype, offset)
        seen[recipe[3]] += 1
        view_cpu = base_cpu.as_strided(sizes, strides, offset)
        view_jax = base_jax.as_strided(sizes, strides, offset)
        assert torch.equal(view_jax.cpu(), view_cpu), (numel, sizes, strides, offset)
        src = torch.randn(sizes)
        view_cpu.copy_(src)
        view_jax.copy_(src.to(JAX))
        assert torch.equal(base_jax.cpu(), base_cpu), (numel, sizes, strides, offset)
    assert {tensor.GRID, tensor.SLICED, tensor.PADDED} <= set(seen), seen  # WHOLE: offset 0 on a fitting size


@pytest.mark.parametrize(
    "index",
    [
        (slice(None), slice(1, None)),  # x[:, 1:]: a padded block before, now one slice
        (slice(1, None), slice(2, 5)),
        (slice(None), 3),
        (slice(2, 4), slice(None, None, 2)),
        (Ellipsis, slice(1, None)),
    ],
    ids=["[:, 1:]", "[1:, 2:5]", "[:, 3]", "[2:4, ::2]", "[..., 1:]"],
)
def test_slices_of_a_matrix_read_and_write_like_cpu(index):
    x_cpu = torch.randn(8, 8)
    x = x_cpu.to(JAX) + 0
    assert torch.equal(x[index].cpu(), x_cpu[index])
    src = torch.randn(x_cpu[index].shape)
    x[index] = src.to(JAX)
    x_cpu[index] = src
    assert torch.equal(x.cpu(), x_cpu)


def test_the_offset_argument_is_made_concrete_even_inside_a_trace():
    # tensor.offset_arg caches one device scalar per offset; the first request may come while a program
    # is being traced (a compiled region reading a view), and a cached tracer would leak into eager code.
    tensor.offset_arg.cache_clear()
    seen = []
    jax.jit(lambda a: seen.append(tensor.offset_arg(12345)) or a)(jnp.zeros(2))
    assert not isinstance(seen[0], jax.core.Tracer)
    assert int(seen[0]) == 12345 and seen[0].dtype == jnp.int32
    assert tensor.offset_arg(12345) is seen[0]


def _traced_through(base: torch.Tensor, read):
    """(jaxpr text, values) of `read()` traced with `base`'s box holding a tracer, as a fused step or a
    compiled graph holds its storages."""
    box = tensor.box_of(base)
    stored = box.array

    def run(a):
        box.array = a
        try:
            return read()
        finally:
            box.array = stored

    return str(jax.make_jaxpr(run)(stored)), jax.jit(run)(stored)


def test_a_view_read_or_written_in_a_traced_program_is_a_static_slice():
    # Issue 37: a traced offset was int64 digit arithmetic XLA's TPU compiler did not fold, and the
    # q/k/v views of a fused projection dynamic slices with layout copies around them.
    x = torch.arange(48.0, device=JAX).reshape(4, 12)
    view = x[:, 4:8].view(4, 2, 2).transpose(0, 1)  # offset 4: a head split's k
    text, value = _traced_through(x, lambda: tensor.read(view))
    assert "dynamic_slice" not in text and "rem" not in text
    assert torch.equal(torch.tensor(jax.device_get(value).tolist()), view.cpu())
    text, parts = _traced_through(x, lambda: tensor.read_parts(view))
    assert parts[1] is None and parts[2] is None and "dynamic_slice" not in text
    assert torch.equal(torch.tensor(jax.device_get(parts[0]).tolist()), view.cpu())

    def write():
        tensor.write(x[:, 4:8], jnp.full((4, 4), -1.0, jnp.float32))
        return tensor.box_of(x).array

    text, written = _traced_through(x, write)
    assert "rem" not in text
    expected = x.cpu().clone()
    expected[:, 4:8] = -1
    assert torch.equal(torch.tensor(jax.device_get(written).tolist()).reshape(4, 12), expected)


def test_an_empty_views_block_past_the_storage_end_is_clamped_in_a_trace_as_eagerly():
    """A static slice refuses what dynamic_slice clamps: pad's circular copy of a [0, 3, 3] tensor
    reaches past its storage's end, and its compiled graph ran op by op (the gate: untraced)."""
    import warnings

    import torch.nn.functional as F

    from jaxdev.graphs.program import EagerGraphWarning

    def pad(x):
        return F.pad(x, (1, 2), mode="circular")

    torch._dynamo.reset()
    compiled = torch.compile(pad, backend="jax", fullgraph=True)
    x = torch.randn(0, 3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerGraphWarning)
        got = compiled(x.to(JAX))
    assert got.shape == (0, 3, 6) and torch.equal(got.cpu(), pad(x))
