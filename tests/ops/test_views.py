"""View ops (jaxdev/ops/views.py): PyTorch's own CPU metadata kernels run on the jax tensor, so a view
aliases its base exactly as on CPU — strides, `_base`, the shared storage, version counters, autograd's
view rules — and in-place writes reach every alias; `set_` and `resize_` share and grow storages as CPU.

Each scenario runs on CPU and on jax (`on_both`), and every tensor it returns — base, views,
siblings — must hold the same values (and, where asked, the same strides) on both. Reading and writing
through strides is tested in tests/core/test_strided.py, overlapping writes in tests/core/test_limits.py.
"""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX, on_both


def base_of(device) -> torch.Tensor:
    return torch.arange(24, dtype=torch.float32, device=device).reshape(2, 3, 4)


VIEW_OPS = {
    "index_int": lambda b: b[1],
    "slice": lambda b: b[:, 1:],
    "step_slice": lambda b: b[..., ::2],
    "negative_index": lambda b: b[-1, :, 1:3],
    "none_ellipsis": lambda b: b[None, ..., 0],
    "select": lambda b: b.select(2, 1),
    "view": lambda b: b.view(6, 4),
    "view_flat": lambda b: b.view(-1),
    "reshape_contiguous": lambda b: b.reshape(4, 6),
    "flatten": lambda b: b.flatten(1),
    "unflatten": lambda b: b.unflatten(2, (2, 2)),
    "t": lambda b: b[0].t(),
    "T_2d": lambda b: b[1].T,
    "mT": lambda b: b.mT,
    "transpose": lambda b: b.transpose(0, 2),
    "permute": lambda b: b.permute(2, 0, 1),
    "movedim": lambda b: b.movedim(0, -1),
    "unsqueeze": lambda b: b.unsqueeze(1),
    "squeeze_dim": lambda b: b[:, :1].squeeze(1),
    "squeeze_all": lambda b: b[:1, 1:2].squeeze(),
    "narrow": lambda b: b.narrow(2, 1, 2),
    "unfold": lambda b: b.unfold(2, 2, 2),
    "diagonal": lambda b: b.diagonal(dim1=1, dim2=2),
    "diagonal_offset": lambda b: b[0].diagonal(1),
    "as_strided": lambda b: b.as_strided((2, 2), (5, 1), 3),
    "unbind": lambda b: b.unbind(1)[2],
    "split": lambda b: b.split(2, dim=2)[1],
    "chunk": lambda b: b.chunk(3, dim=1)[1],
    "detach": lambda b: b.detach(),
    "view_as": lambda b: b.view_as(torch.empty(4, 6, device=b.device)),
    "alias": lambda b: torch.ops.aten.alias(b),
}


@pytest.mark.parametrize("name", list(VIEW_OPS))
def test_view_metadata_matches_cpu(name):
    make = VIEW_OPS[name]

    def scenario(device):
        base = base_of(device)
        view = make(base)
        return view, view._base is base, view.is_contiguous()

    on_both(scenario, check_stride=True)


@pytest.mark.parametrize("name", list(VIEW_OPS))
def test_view_shares_storage_with_base(name):
    base = base_of(JAX)
    view = VIEW_OPS[name](base)
    assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()


@pytest.mark.parametrize("name", list(VIEW_OPS))
def test_inplace_write_through_view_changes_base(name):
    make = VIEW_OPS[name]

    def scenario(device):
        base = base_of(device)
        view = make(base)
        view.mul_(10)
        view.add_(1)
        return base, view

    on_both(scenario)


@pytest.mark.parametrize("name", list(VIEW_OPS))
def test_write_to_base_is_seen_by_view(name):
    make = VIEW_OPS[name]

    def scenario(device):
        base = base_of(device)
        view = make(base)
        base.add_(100)
        base[1, 2].fill_(-1)
        return view

    on_both(scenario)


def test_sibling_views_see_each_others_writes():
    def scenario(device):
        base = base_of(device)
        row = base[0]
        col = base[:, 1]
        diag = base.diagonal(dim1=1, dim2=2)
        flat = base.view(-1)
        row.fill_(7)
        col.mul_(-1)
        diag.add_(1000)
        flat[5:9].zero_()
        return base, row, col, diag, flat

    on_both(scenario)


def test_view_of_view_of_view():
    def scenario(device):
        base = base_of(device)
        v1 = base.transpose(0, 2)  # 4,3,2
        v2 = v1[1:, ::2]  # 3,2,2
        v3 = v2.select(2, 1).t()  # 2,3
        v3.mul_(-2)
        v2[0].fill_(0.5)
        return base, v1, v2, v3, v3._base is base

    on_both(scenario, check_stride=True)


def test_transpose_writes():
    def scenario(device):
        x = torch.arange(12.0, device=device).reshape(3, 4)
        xt = x.t()
        xt[0] = torch.tensor([10.0, 20.0, 30.0], device=device)
        xt[:, 1] = -1
        xt.mul_(2)
        x.t()[1:3].copy_(torch.ones(2, 3))
        return x, xt

    on_both(scenario)


def test_permuted_view_inplace_with_other_tensor():
    def scenario(device):
        x = base_of(device)
        p = x.permute(1, 2, 0)  # 3,4,2
        p.add_(torch.arange(2.0, device=device))  # broadcast along the last dim
        p.sub_(x.permute(1, 2, 0).clone() * 0.5)
        return x

    on_both(scenario)


def test_reshape_of_non_contiguous_is_a_copy_like_cpu():
    def scenario(device):
        x = torch.arange(6.0, device=device).reshape(2, 3)
        r = x.t().reshape(-1)
        r.fill_(0)
        return x, r, r._base is None

    on_both(scenario)


def test_contiguous_and_clone_do_not_alias():
    def scenario(device):
        x = torch.arange(6.0, device=device).reshape(2, 3)
        c = x.clone()
        tc = x.t().contiguous()
        same = x.contiguous()
        c.add_(1)
        tc.add_(2)
        return x, c, tc, same is x, tc.stride()

    on_both(scenario)


def test_view_dtype_aliases_bits():
    def scenario(device):
        f = torch.tensor([1.0, -2.0, 0.5, 3.0], device=device)
        i = f.view(torch.int32)
        i[0] = 0x40400000  # 3.0
        b = f.view(torch.uint8)
        b[4:8] = 0
        return f, i, b

    on_both(scenario)


def test_complex_views_real_imag_view_as_real():
    def scenario(device):
        c = torch.tensor([1 + 2j, 3 - 4j, -5j], device=device)
        c.real.mul_(10)
        c.imag[1] = 7
        r = torch.view_as_real(c)
        r[2, 0] = -1
        back = torch.view_as_complex(r)
        return c, r, back, c.real, c.imag

    on_both(scenario)


def test_conj_and_neg_views():
    def scenario(device):
        c = torch.tensor([1 + 2j, 3 - 4j], device=device)
        cj = c.conj()
        values = cj.clone(), cj.imag.clone(), cj.is_conj()
        cj[0] = 5 + 6j  # written through the conjugate view: c[0] becomes 5-6j
        cj.mul_(2)
        return c, cj, cj.resolve_conj(), values

    on_both(scenario)


def test_view_as_real_of_conj_view_raises_like_cpu():
    on_both(lambda d: torch.view_as_real(torch.tensor([1 + 2j], device=d).conj()))


# --- version counters and autograd ---------------------------------------------------------------------


def test_version_counter_is_shared_by_views_and_bumps():
    x = torch.zeros(3, 4, device="jax")
    v = x[1]
    t = x.t()
    start = x._version
    v.add_(1)
    assert x._version == v._version == t._version > start
    before = x._version
    t.copy_(torch.ones(4, 3))
    assert x._version > before
    before = x._version
    x[0, 0] = 3.0
    assert v._version > before
    before = x._version
    torch.mul(torch.ones(4, device="jax"), 2, out=v)
    assert x._version > before


def test_inplace_on_saved_tensor_raises_in_backward():
    def scenario(device):
        a = torch.ones(3, device=device, requires_grad=True)
        b = a * 2
        c = b * b  # saves b
        b.add_(1)
        c.sum().backward()

    err = on_both(scenario, match="modified by an inplace operation")
    assert isinstance(err, RuntimeError)


def test_inplace_through_view_on_saved_tensor_raises_in_backward():
    def scenario(device):
        a = torch.ones(2, 3, device=device, requires_grad=True)
        y = a.exp()  # saves its result
        y[0].mul_(2)
        y.sum().backward()

    on_both(scenario, match="modified by an inplace operation")


def test_inplace_on_view_of_leaf_requiring_grad_raises_like_cpu():
    def scenario(device):
        a = torch.ones(3, device=device, requires_grad=True)
        a[1:].mul_(2)

    on_both(scenario, match="a view of a leaf Variable that requires grad is being used in an in-place operation")


def test_views_across_requires_grad():
    def scenario(device):
        w = torch.tensor([1.0, 2.0, 3.0, 4.0], device=device, requires_grad=True)
        base = torch.zeros(3, 4, device=device)
        base[1].copy_(w * 2)  # a no-grad base now depends on w
        assert base.requires_grad
        grad_fn = type(base.grad_fn).__name__
        (base * base).sum().backward()
        return base, w.grad, grad_fn

    on_both(scenario)


def test_inplace_on_non_leaf_view_backward():
    def scenario(device):
        w = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=device, requires_grad=True)
        y = w * 1
        y[0].mul_(3)
        y.t()[1].add_(w[:, 0])
        y.sum().backward()
        return y, w.grad, type(y.grad_fn).__name__

    on_both(scenario)


def test_resize_and_data_assignment_like_cpu():
    def scenario(device):
        x = torch.arange(6.0, device=device)
        v = x[:3]
        x.resize_(2, 2)  # shrinking keeps the storage: the view still aliases
        x.mul_(10)
        y = torch.zeros(3, device=device)
        y.resize_(5)  # growing keeps the first elements
        y[:3].fill_(1)
        p = torch.nn.Parameter(torch.ones(2, device=device))
        p.data = torch.full((2,), 4.0, device=device)
        p.data.add_(1)
        return x, v, y[:3], p.detach()

    on_both(scenario)


def test_set_shares_storage_like_cpu():
    def scenario(device):
        src = torch.arange(6.0, device=device)
        t = torch.empty(0, device=device)
        t.set_(src.untyped_storage(), 2, (2, 2), (1, 2))
        t.mul_(-1)
        u = torch.empty(0, device=device).set_(src)
        u[0] = 100
        return src, t, u

    on_both(scenario, check_stride=True)


def test_is_set_to_compares_storages_and_geometry_as_cpu():
    """is_set_to ran on the CPU fallback, whose copies never share a storage (always False)."""
    for device in ("cpu", JAX):
        t1, t2 = torch.empty(3, 4, device=device), torch.empty(3, 4, device=device)
        t3 = torch.tensor([], device=device).set_(t1)
        got = [t1.is_set_to(t2), t1.is_set_to(t3), t3.is_set_to(t1), t1.is_set_to(t1.view(4, 3))]
        assert got == [False, True, True, False], device
