"""Per-op eager's memo kernels (jaxdev/csrc/memo_ops.cpp, jaxdev/ops/kit/memo.py): a call keyed as met
before replays the program its Python kernel ran, and gives what that kernel gives, bit for bit, with
its layouts, aliasing and errors; a call the key cannot say, or a kernel that did more than one program,
runs in Python every time."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from jaxdev import native, tensor
from jaxdev.ops.kit import memo

pytestmark = [
    pytest.mark.skipif(native.module is None, reason="the memo kernels are native"),
    pytest.mark.per_op_mode("per-op eager's native kernels; fused mode records these ops"),
]
aten = torch.ops.aten


def _python(op, *args, **kwargs):
    """What the op's Python kernel gives (jaxdev_memo::op runs it with no memo frame)."""
    name = op._schema.name.removeprefix("aten::")
    slow = getattr(torch.ops.jaxdev_memo, name)
    return getattr(slow, op._overloadname) if op._overloadname != "default" else slow.default


def _same(a, b):
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    if not isinstance(a, torch.Tensor):
        assert a == b
        return
    assert (a.dtype, a.shape, a.stride(), a.storage_offset()) == (b.dtype, b.shape, b.stride(), b.storage_offset())
    x, y = a.cpu(), b.cpu()
    assert torch.equal(
        x.view(torch.int32) if x.dtype == torch.float32 else x, y.view(torch.int32) if y.dtype == torch.float32 else y
    )


def _box(t):
    return tensor.BOXES[torch._C._data_address(t)]


def _cases():
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g).to("jax")

    x3, w, b = r(2, 8, 16), r(24, 16), r(24)
    qkv = r(2, 8, 3 * 16).view(2, 8, 3, 4, 4).permute(2, 0, 3, 1, 4)  # q, k, v: views of one storage
    out, lse = aten._scaled_dot_product_fused_attention_overrideable(qkv[0], qkv[1], qkv[2], is_causal=True)[:2]
    ln_out, mean, rstd = aten.native_layer_norm(x3, [16], r(16), r(16), 1e-5)
    return {
        "addmm, a 3-D tensor's rows and a transposed weight": (aten.addmm.default, (b, x3.view(-1, 16), w.t())),
        "addmm with beta and alpha": (aten.addmm.default, (b, x3.view(-1, 16), w.t()), {"beta": 0.5, "alpha": 2}),
        "mm of a tensor with itself": (aten.mm.default, (r(5, 5), None)),
        "add, a 2-D result viewed 3-D (past the fast kernel)": (
            aten.add.Tensor,
            (x3, (x3.view(16, 16) * 2).view(2, 8, 16)),
        ),
        "sub with alpha (past the fast kernel)": (
            aten.sub.Tensor,
            (x3, x3.transpose(1, 2).transpose(1, 2) * 1),
            {"alpha": 3},
        ),
        "mul of a broadcast view": (aten.mul.Tensor, (x3, r(16).expand(2, 8, 16))),
        "bmm": (aten.bmm.default, (r(3, 4, 5), r(3, 5, 2))),
        "sum over a dim of a view": (aten.sum.dim_IntList, (x3.transpose(1, 2), [1], True)),
        "gelu tanh": (aten.gelu.default, (x3,), {"approximate": "tanh"}),
        "log_softmax": (aten._log_softmax.default, (x3, -1, False)),
        "softmax backward": (aten._softmax_backward_data.default, (x3, x3.softmax(-1), -1, torch.float32)),
        "cat of views": (aten.cat.default, ([x3[:, :4], x3[:, 4:], x3.transpose(1, 2).transpose(1, 2)], 1)),
        "layer norm": (aten.native_layer_norm.default, (x3, [16], r(16), None, 1e-5)),
        "layer norm backward": (
            aten.native_layer_norm_backward.default,
            (r(2, 8, 16), x3, [16], mean, rstd, r(16), r(16), [True, True, False]),
        ),
        "attention over one qkv storage": (
            aten._scaled_dot_product_fused_attention_overrideable.default,
            (qkv[0], qkv[1], qkv[2]),
            {"is_causal": True},
        ),
        "attention backward, permuted results as arguments": (
            aten._scaled_dot_product_fused_attention_overrideable_backward.default,
            (r(2, 4, 8, 4), qkv[0], qkv[1], qkv[2], None, [True, True, True, False], out, lse)
            + (torch.empty(0, device="jax"), torch.empty(0, device="jax"), 8, 8, 0.0, True)
            + (torch.zeros((), dtype=torch.int64, device="jax"),) * 2,
        ),
        "layer norm without weight and bias": (aten.native_layer_norm.default, (ln_out, [16], None, None, 1e-6)),
        "slice backward, a qkv split's part": (aten.slice_backward.default, (r(2, 8, 16), [2, 8, 48], 2, 16, 32, 1)),
        "slice backward of a strided slice": (aten.slice_backward.default, (r(3, 4), [7, 4], 0, 1, 7, 2)),
    }


CASES = _cases()


@pytest.mark.parametrize("name", list(CASES))
def test_a_replay_gives_what_the_python_kernel_gives(name):
    op, args, *rest = CASES[name]
    kwargs = rest[0] if rest else {}
    if args[-1] is None:  # the first tensor again
        args = (args[0], args[0])
    versions = [a._version for a in args if isinstance(a, torch.Tensor)]
    first = op(*args, **kwargs)
    learned = memo.STATS.slow
    replays = [op(*args, **kwargs) for _ in range(2)]
    assert memo.STATS.slow == learned, "the second call was not replayed"
    expected = _python(op)(*args, **kwargs)
    for got in (first, *replays):
        _same(got, expected)
    assert [a._version for a in args if isinstance(a, torch.Tensor)] == versions
    for got, want in zip(*(x if isinstance(x, tuple) else (x,) for x in (replays[0], expected))):
        if isinstance(got, torch.Tensor):  # a permuted result keeps its logical value, as wrap_strided's
            assert (_box(got).logical is None) == (_box(want).logical is None)
            assert got.is_contiguous() == want.is_contiguous() and got.requires_grad == want.requires_grad
    if isinstance(first, tuple):  # fresh results, aliased among themselves as the kernel aliases them
        same = [[x is y for y in first] for x in first]
        assert [[x is y for y in replays[0]] for x in replays[0]] == same


def test_a_replay_reads_each_arguments_array_now():
    a, b = torch.randn(4, 4, device="jax"), torch.randn(4, 4, device="jax")
    torch.mm(a, b.t())
    a.add_(1.0)  # a new array in a's box: the replay must read it (a stale one is off by whole units)
    # close to CPU's, not equal: XLA's CPU product and PyTorch's sum in another order on some CPUs (AMD EPYC)
    torch.testing.assert_close(torch.mm(a, b.t()).cpu(), torch.mm(a.cpu(), b.cpu().t()))
    c = a.clone()  # c's storage holds a's very array: a key of its own
    torch.testing.assert_close(torch.mm(a, c).cpu(), torch.mm(a.cpu(), a.cpu()))
    torch.testing.assert_close(torch.mm(a, b).cpu(), torch.mm(a.cpu(), b.cpu()))


def test_a_reshaped_box_is_another_key():
    x = torch.randn(2, 3, 4, device="jax")
    w = torch.randn(5, 4, device="jax")
    rows = x.view(6, 4)
    first = torch.mm(rows, w.t())
    rows.clone()  # may store x's array as (6, 4): the box's shape is part of the key
    assert torch.equal(torch.mm(rows, w.t()).cpu(), first.cpu())
    torch.testing.assert_close(first.cpu(), torch.mm(x.cpu().view(6, 4), w.cpu().t()))  # (the order, above)


def test_the_matmul_precision_is_part_of_the_key():
    a, b = torch.randn(8, 8, device="jax"), torch.randn(8, 8, device="jax")
    before = torch.get_float32_matmul_precision()
    try:
        for precision in ("highest", "high", "highest"):
            torch.set_float32_matmul_precision(precision)
            slow = memo.STATS.slow
            got = torch.mm(a, b)
            again = torch.mm(a, b)
            assert memo.STATS.slow == slow + 1  # learned anew under each setting, then replayed
            _same(got, _python(aten.mm.default)(a, b))
            _same(again, got)
    finally:
        torch.set_float32_matmul_precision(before)


def test_a_forgotten_platform_forgets_the_learned_keys():
    """A key holds no platform facts: when the process's platform changes (deviceless.forget_platform,
    a stand-in becoming a TPU), the programs learned before are dropped and each op learns anew."""
    from jaxdev.audit import deviceless

    a, b = torch.randn(8, 8, device="jax"), torch.randn(8, 8, device="jax")
    torch.mm(a, b)
    slow = memo.STATS.slow
    torch.mm(a, b)
    assert memo.STATS.slow == slow  # replayed
    deviceless.forget_platform()
    assert native.module.forget_replays() == 0  # forget_platform dropped them all
    got = torch.mm(a, b)
    assert memo.STATS.slow == slow + 1  # learned anew
    _same(got, _python(aten.mm.default)(a, b))


def test_errors_are_raised_at_every_call():
    a, b = torch.randn(3, 4, device="jax"), torch.randn(5, 6, device="jax")
    for _ in range(3):
        with pytest.raises(RuntimeError, match="cannot be multiplied"):
            torch.mm(a, b)


def test_training_through_memo_ops_equals_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4))
    on_jax = torch.nn.Sequential(*[m for m in __import__("copy").deepcopy(model)]).to("jax")
    x, y = torch.randn(5, 8), torch.randint(0, 4, (5,))
    for net, dev in ((model, "cpu"), (on_jax, "jax")):
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            F.cross_entropy(net(x.to(dev)), y.to(dev)).backward()
            opt.step()
    for p, q in zip(model.parameters(), on_jax.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-5, atol=1e-6)


def test_a_kernel_that_warns_is_never_replayed(monkeypatch):
    """A replay would not warn: a call whose kernel showed a warning is not learned, so the kernel runs
    (and warns, as its filters decide) at every call."""
    from jaxdev.ops.reductions import sums

    reduce_over = sums.reduce_over

    def warning(*args, **kwargs):
        warnings.warn("a kernel's own warning", UserWarning, stacklevel=2)
        return reduce_over(*args, **kwargs)

    x = torch.randn(3, 7, 11, device="jax")  # a key no other test meets
    expected = _python(aten.sum.dim_IntList)(x, [2])
    monkeypatch.setattr(sums, "reduce_over", warning)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sums_of = [x.sum(2) for _ in range(3)]
    assert [str(w.message) for w in caught] == ["a kernel's own warning"] * 3
    for got in sums_of:
        _same(got, expected)
