"""Result layouts (strides) as PyTorch computes them: elementwise results in their inputs' memory
order, channels_last kept by convolution, normalization, pooling and activations, the compiled path
giving what AOTAutograd planned, and the logical/physical storage of such results staying exact."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from jaxdev_testing import assert_same

torch.manual_seed(0)


pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


def same(actual, expected, **tol):
    assert_same(actual, expected, check_stride=True, **tol)


def _pair(t):
    return t, t.to("jax")


def _cl(shape=(2, 3, 6, 6)):
    x = torch.randn(shape).to(memory_format=torch.channels_last)
    return x, x.to("jax")


# --- elementwise: TensorIterator's memory order ---------------------------------------------------


def test_transposed_plus_scalar_is_transposed_and_view_raises_like_cpu():
    x, xj = _pair(torch.randn(3, 4))
    r, rj = x.t() + 1, xj.t() + 1
    assert r.stride() == (1, 4)
    same(rj, r)
    assert not rj.is_contiguous()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        r.view(-1)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        rj.view(-1)
    assert_same(rj.reshape(-1), r.reshape(-1))


@pytest.mark.parametrize(
    "make",
    [
        lambda x: (x.t(), x.t()),  # both transposed
        lambda x: (x.t(), x.t().contiguous()),  # the first input decides
        lambda x: (x.t().contiguous(), x.t()),
        lambda x: (x.t(), x[0, :3]),  # broadcast row
        lambda x: (x[:1, :3].expand(4, 3), x.t()),  # a broadcast first input: the other decides
        lambda x: (x.t(), x.t()[:, :1]),
    ],
    ids=["both", "first", "second", "row", "expanded", "column"],
)
def test_binary_results_follow_cpu_memory_order(make):
    x = torch.randn(3, 4)
    a, b = make(x)
    aj, bj = make(x.to("jax"))
    for fn in (torch.add, torch.mul, torch.maximum, torch.atan2):
        same(fn(aj, bj), fn(a, b))


def test_permuted_3d_unary_and_mixed_orders():
    x = torch.randn(2, 3, 4)
    p, q = x.permute(2, 0, 1), torch.randn(4, 2, 3).permute(0, 2, 1).transpose(1, 2)
    pj, qj = p.to("jax"), q.to("jax")
    assert p.stride() == pj.stride()
    same(pj.neg(), p.neg())
    same(torch.sin(pj), torch.sin(p), atol=1e-6, rtol=1e-6)  # strides exact; values within libm ulps
    same(pj + qj, p + q)
    same(qj * pj, q * p)
    same(torch.where(pj > 0, pj, qj), torch.where(p > 0, p, q))
    same(pj.to(torch.float64), p.to(torch.float64))


def test_pointwise_ops_that_clone_contiguous_first():
    x = torch.randn(5, 7).t()
    xj = x.to("jax")
    same(xj.masked_fill(xj > 0, 1.0), x.masked_fill(x > 0, 1.0))
    same(xj.masked_fill(xj > 0, torch.tensor(1.0)), x.masked_fill(x > 0, torch.tensor(1.0)))
    same(torch.mvlgamma(xj.abs() + 2, 1), torch.mvlgamma(x.abs() + 2, 1), atol=1e-5, rtol=1e-5)


def test_sliced_input_gives_a_dense_result():
    x = torch.randn(4, 6)
    s, sj = x[:, ::2], x.to("jax")[:, ::2]
    same(sj * 2, s * 2)
    t, tj = x[::2].t(), x.to("jax")[::2].t()
    same(tj * 2, t * 2)


def test_chains_of_permuted_results_read_back_exactly():
    x, xj = _pair(torch.randn(2, 3, 4, 5).permute(0, 2, 3, 1))
    r, rj = (x * 2 + 1).neg(), (xj * 2 + 1).neg()
    same(rj, r)
    # other views of the same storage read the physical order
    same(rj.permute(0, 3, 1, 2), r.permute(0, 3, 1, 2))
    assert_same(rj.permute(0, 3, 1, 2).reshape(-1), r.permute(0, 3, 1, 2).reshape(-1))
    assert_same(rj.as_strided((10,), (1,)), r.as_strided((10,), (1,)))
    # writes through a view of a permuted result are seen by the result
    r.permute(0, 3, 1, 2)[0, 0] = 7.0
    rj.permute(0, 3, 1, 2)[0, 0] = 7.0
    same(rj, r)
    same(rj + 0, r + 0)


def test_in_place_and_out_keep_the_destination_strides():
    x, xj = _pair(torch.randn(3, 4))
    d, dj = torch.zeros(4, 3), torch.zeros(4, 3, device="jax")
    torch.add(x.t(), 1, out=d)
    torch.add(xj.t(), 1, out=dj)
    same(dj, d)
    e, ej = torch.zeros(3, 4).t(), torch.zeros(3, 4, device="jax").t()
    torch.mul(x.t(), 2, out=e)
    torch.mul(xj.t(), 2, out=ej)
    same(ej, e)
    c, cj = _cl()
    c.mul_(3).relu_()
    cj.mul_(3).relu_()
    same(cj, c)
    same(cj.contiguous(), c.contiguous())


def test_a_resized_out_is_laid_out_as_the_inputs_lie():
    """TensorIterator restrides an out= it resizes (empty, or of another shape) in its inputs' memory
    order; a product's out= stays contiguous."""
    x, xj = _pair(torch.randn(3, 4))
    for make in (lambda d: torch.empty(0, device=d), lambda d: torch.empty(5, device=d)):
        o, oj = make("cpu"), make("jax")
        torch.add(x.t(), 1, out=o)
        torch.add(xj.t(), 1, out=oj)
        same(oj, o)
    c, cj = _cl()
    o, oj = torch.empty(0), torch.empty(0, device="jax")
    torch.mul(c, 2, out=o)
    torch.mul(cj, 2, out=oj)
    same(oj, o)
    o, oj = torch.empty(0), torch.empty(0, device="jax")
    torch.mm(x.t(), x, out=o)
    torch.mm(xj.t(), xj, out=oj)
    same(oj, o, atol=1e-5, rtol=1e-5)


# --- channels_last --------------------------------------------------------------------------------


def test_channels_last_activations_and_elementwise():
    x, xj = _cl()
    same(torch.relu(xj), torch.relu(x))
    same(F.gelu(xj), F.gelu(x), atol=1e-6, rtol=1e-6)
    same(xj * 2 + xj, x * 2 + x)


def test_channels_last_convolution():
    x, xj = _cl()
    w = torch.randn(4, 3, 3, 3)
    wj = w.to("jax")
    same(F.conv2d(xj, wj, padding=1), F.conv2d(x, w, padding=1), atol=1e-5, rtol=1e-5)
    # a channels_last weight makes a contiguous input's result channels_last on CPU too
    wc = w.to(memory_format=torch.channels_last)
    got, want = F.conv2d(xj.contiguous(), wc.to("jax")), F.conv2d(x.contiguous(), wc)
    assert want.is_contiguous(memory_format=torch.channels_last)
    same(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("training", [True, False])
def test_channels_last_batch_norm(training):
    x, xj = _cl()
    bn, bnj = torch.nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3).to("jax")
    bn.train(training), bnj.train(training)
    same(bnj(xj), bn(x), atol=1e-5, rtol=1e-5)


def test_channels_last_pooling_and_upsampling():
    x, xj = _cl()
    same(F.max_pool2d(xj, 2), F.max_pool2d(x, 2))
    same(F.avg_pool2d(xj, 2), F.avg_pool2d(x, 2), atol=1e-6, rtol=1e-6)
    same(F.interpolate(xj, scale_factor=2), F.interpolate(x, scale_factor=2))


def test_channels_last_model_forward_and_backward():
    torch.manual_seed(1)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    mj = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).to("jax")
    mj.load_state_dict(m.state_dict())
    m, mj = m.to(memory_format=torch.channels_last), mj.to(memory_format=torch.channels_last)
    x, xj = _cl((2, 3, 7, 7))
    x.requires_grad_(), xj.requires_grad_()
    out, outj = m(x), mj(xj)
    same(outj, out, atol=1e-5, rtol=1e-5)
    out.square().sum().backward()
    outj.square().sum().backward()
    same(xj.grad, x.grad, atol=1e-4, rtol=1e-4)
    same(mj[0].weight.grad, m[0].weight.grad, atol=1e-4, rtol=1e-4)


def test_gradients_of_permuted_inputs():
    a = torch.randn(2, 3, 4).permute(2, 0, 1).requires_grad_()
    aj = a.detach().to("jax").requires_grad_()
    (a.sin() * a.exp()).sum().backward()
    (aj.sin() * aj.exp()).sum().backward()
    same(aj.grad, a.grad, atol=1e-6, rtol=1e-6)


# --- compiled programs ------------------------------------------------------------------------------


def test_compiled_elementwise_gives_cpu_strides():
    def f(x):
        y = x.t() + 1
        return y * 2, y.reshape(-1)

    x = torch.randn(3, 4)
    want = f(x)
    got = torch.compile(f, backend="jax")(x.to("jax"))
    for g, w in zip(got, want):
        same(g, w)


def test_compiled_channels_last_conv_model_gives_cpu_strides():
    """The program's results have CPU's strides, and those are what AOTAutograd planned from
    FakeTensors on the jax device (its view replays rely on them), forward and backward."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    torch.manual_seed(2)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    mj = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).to("jax")
    mj.load_state_dict(m.state_dict())
    m, mj = m.to(memory_format=torch.channels_last), mj.to(memory_format=torch.channels_last)
    x, xj = _cl((2, 3, 7, 7))
    x.requires_grad_(), xj.requires_grad_()
    want = m(x)
    got = torch.compile(mj, backend="jax")(xj)
    assert want.is_contiguous(memory_format=torch.channels_last)
    same(got, want, atol=1e-5, rtol=1e-5)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        planned = mj(mode.from_tensor(xj.detach()))
    assert got.stride() == planned.stride()
    want.square().sum().backward()
    got.square().sum().backward()
    same(xj.grad, x.grad, atol=1e-4, rtol=1e-4)
    same(mj[0].weight.grad, m[0].weight.grad, atol=1e-4, rtol=1e-4)


def test_fake_convolution_on_jax_is_laid_out_as_cpu():
    from torch._subclasses.fake_tensor import FakeTensorMode

    x = torch.randn(2, 3, 6, 6).to(memory_format=torch.channels_last)
    w = torch.randn(4, 3, 3, 3)
    args = ([1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    want = torch.ops.aten.convolution(x, w, None, *args)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fx, fw = mode.from_tensor(x.to("jax")), mode.from_tensor(w.to("jax"))
    with mode:
        out = torch.ops.aten.convolution(fx, fw, None, *args)
        grads = torch.ops.aten.convolution_backward(out, fx, fw, [4], *args, [True, True, True])
    assert out.device.type == "jax" and out.stride() == want.stride()
    cpu_grads = torch.ops.aten.convolution_backward(want, x, w, [4], *args, [True, True, True])
    assert [g.stride() for g in grads] == [g.stride() for g in cpu_grads]


def test_size_one_dims_strided_channels_last_propagate_as_on_cpu():
    """is_contiguous() ignores size-1 dims' strides; TensorIterator does not (PyTorch's
    test_memory_format_propagation_rules: (10, 3, 1, 1) channels_last + (3, 1, 1))."""
    for device in ("cpu", "jax"):
        a = torch.randn(10, 3, 1, 1).to(device).clone(memory_format=torch.channels_last)
        b = torch.randn(3, 1, 1).to(device)
        assert a.is_contiguous() and a.stride() == (3, 1, 3, 3)
        if device == "cpu":
            expected = (a + b).stride()
        else:
            assert (a + b).stride() == expected
            for f in (lambda x: x * 2, lambda x: 2 * x, lambda x: x.clamp(min=0.1), lambda x: x**2):
                assert f(a).stride() == f(a.cpu()).stride()  # a Python number is an operand of mul.Tensor only


def test_copies_of_a_non_dense_tensor_keep_its_order_of_dims():
    """clone() and .to("jax") of a strided slice lay out as CPU's empty_like(preserve_format): dense
    strides in the input's order of dims (jax gave contiguous; found by OpInfo's reference inputs),
    checked against CPU on random layouts, expanded ones included."""
    import random

    rng = random.Random(0)
    for _ in range(30):  # each new layout compiles its programs: ~0.7 s each here
        ndim = rng.randint(1, 4)
        shape = [rng.choice([1, 2, 3, 5]) for _ in range(ndim)]
        strides = [rng.choice([0, 1, 2, 3, 5, 7, 12, 30]) for _ in range(ndim)]
        offset = rng.randint(0, 3)
        base = torch.randn(offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1)
        x = base.as_strided(shape, strides, offset)
        on_jax = base.to("jax").as_strided(shape, strides, offset)
        want = x.clone()
        assert on_jax.clone().stride() == want.stride(), (shape, strides)
        if 0 not in strides:  # an expanded tensor's transfer is CPU -> device, not empty_like's case
            assert x.to("jax").stride() == want.stride(), (shape, strides)
        assert torch.equal(on_jax.clone().cpu(), want)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, y: torch.floor_divide(x, y),  # untagged, but TensorIterator's: the input's layout
        lambda x, y: torch.floor_divide(y, x),
        lambda x, y: torch.angle(torch.complex(x, y)),  # contiguous on CPU whatever the input's layout
        lambda x, y: torch.angle(x),  # a real angle stays TensorIterator's
        lambda x, y: F.logsigmoid(x),
        lambda x, y: F.rrelu(x),
    ],
)
def test_reference_input_layouts_as_cpu(fn):
    # found by OpInfo's reference inputs: a (9, 5, 2) input permuted to strides (10, 1, 5)
    x = torch.randn(9, 2, 5).permute(0, 2, 1)
    y = torch.randn(9, 5, 2) + 3
    same(fn(x.to("jax"), y.to("jax")), fn(x, y), rtol=1.3e-6, atol=1e-6)  # the strides exactly, values to an ulp


@pytest.mark.crashprone
def test_layouts_where_the_caller_excluded_python_dispatch():
    """A tensor constructor excludes the Python dispatch keys around its host-to-device copy; in fused
    eager that copy can flush the pending segment (the same upload again), whose trace asks a fake
    kernel for a non-contiguous op's layout. With the keys excluded the fake twins reached CPU's real
    `cat`, which read their missing data: a segfault (transformers' DynamicLayer: two
    `torch.tensor([], device=...)`, a cat of a transposed key onto the first)."""
    import jaxdev
    from jaxdev import layout

    key = torch.randn(2, 4, 3, 8)[..., 2:6].transpose(1, 2)  # (2, 3, 4, 4), neither contiguous nor dense
    with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python)):
        got = layout.computed_layouts(torch.ops.aten.cat.default, ([torch.empty(0), key], -2), {}, False)
    assert got == ((tuple(key.shape), torch.cat([torch.empty(0), key], -2).stride()),)
    with jaxdev.eager_mode("fused"):
        keys = torch.tensor([], device="jax")
        keys = torch.cat([keys, key.to("jax")], dim=-2)
        values = torch.tensor([], device="jax")  # the same upload again: flushes the segment with the cat
        same(keys, torch.cat([torch.empty(0), key], -2))
        assert values.shape == (0,)
