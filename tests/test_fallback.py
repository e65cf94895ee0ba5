"""an op without a jax kernel runs on CPU, with in-place/out= semantics, policy and counters.

The ops under test live in the test-only namespace `jaxdev_test` and have a CPU kernel only, so they
always reach the fallback, whatever kernels jaxdev grows.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from jaxdev_testing import JAX, assert_same

import jaxdev
import jaxdev.fallback
import jaxdev.ops.registry as registry

_LIB = torch.library.Library("jaxdev_test", "DEF")
_LIB.define("scale(Tensor x, float k) -> Tensor")
_LIB.define("scale_(Tensor(a!) self, float k) -> Tensor(a!)")
_LIB.define("scale.out(Tensor x, float k, *, Tensor(a!) out) -> Tensor(a!)")
_LIB.define("pair(Tensor x, Tensor y) -> (Tensor, Tensor)")
_LIB.define("total(Tensor x) -> float")
_LIB.define("stack_sum(Tensor[] xs, *, Tensor? bias=None) -> Tensor")
_LIB.define("first_row(Tensor(a) x) -> Tensor(a)")
_LIB.define("other(Tensor x) -> Tensor")


def _scale(x, k):
    return x * k


def _scale_(x, k):
    return x.mul_(k)


def _scale_out(x, k, *, out):
    out.resize_(x.shape)
    return out.copy_(x * k)


def _pair(x, y):
    return x + y, x - y


def _total(x):
    return float(x.sum())


def _stack_sum(xs, *, bias=None):
    r = torch.stack(xs).sum(0)
    return r if bias is None else r + bias


def _first_row(x):
    return x[0]


def _other(x):
    return x.neg()


for _name, _fn in [
    ("scale", _scale),
    ("scale_", _scale_),
    ("scale.out", _scale_out),
    ("pair", _pair),
    ("total", _total),
    ("stack_sum", _stack_sum),
    ("first_row", _first_row),
    ("other", _other),
]:
    _LIB.impl(_name, _fn, "CPU")

ops = torch.ops.jaxdev_test


def _x(device="jax"):
    return torch.arange(6.0, device=device).reshape(2, 3)


def _fallback_warnings(record):
    return [w for w in record if "no jax kernel" in str(w.message)]


def test_op_without_jax_kernel_runs_and_result_is_on_jax(fallback_mode):
    fallback_mode("silent")
    result = ops.scale(_x(), 2.5)
    assert_same(result, ops.scale(_x("cpu"), 2.5))
    assert result.device == JAX


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.bfloat16, torch.complex64], ids=str)
def test_fallback_keeps_dtype(fallback_mode, dtype):
    fallback_mode("silent")
    x = torch.tensor([[1, 2], [3, 4]], dtype=dtype)
    assert_same(ops.scale(x.to("jax"), 2.0), ops.scale(x, 2.0))


def test_warn_mode_warns_once_per_op(fallback_mode):
    fallback_mode("warn")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ops.scale(_x(), 2.0)
        ops.scale(_x(), 3.0)
        ops.other(_x())
        ops.other(_x())
    found = _fallback_warnings(record)
    assert len(found) == 2, [str(w.message) for w in found]
    assert "jaxdev_test::scale" in str(found[0].message)
    assert "jaxdev_test::other" in str(found[1].message)
    assert "JAXDEV_FALLBACK" in str(found[0].message)


def test_warn_is_the_default(fallback_mode, monkeypatch):
    fallback_mode("warn")
    monkeypatch.delenv("JAXDEV_FALLBACK")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ops.scale(_x(), 2.0)
    assert len(_fallback_warnings(record)) == 1


def test_silent_mode_does_not_warn_but_counts(fallback_mode):
    fallback_mode("silent")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ops.scale(_x(), 2.0)
        ops.scale(_x(), 2.0)
    assert not _fallback_warnings(record)
    counts = jaxdev.fallback_counts()
    assert counts.get("jaxdev_test::scale") == 2, counts


def test_error_mode_raises_naming_the_op(fallback_mode):
    fallback_mode("error")
    with pytest.raises(NotImplementedError) as info:
        ops.scale(_x(), 2.0)
    assert "jaxdev_test::scale" in str(info.value)
    assert "JAXDEV_FALLBACK" in str(info.value)


def test_counters_count_per_op_and_reset(fallback_mode):
    fallback_mode("silent")
    ops.scale(_x(), 2.0)
    ops.other(_x())
    ops.other(_x())
    counts = jaxdev.fallback_counts()
    assert counts.get("jaxdev_test::scale") == 1 and counts.get("jaxdev_test::other") == 2, counts
    assert isinstance(counts, dict)
    counts["jaxdev_test::scale"] = 99  # a copy: the caller cannot corrupt the counters
    assert jaxdev.fallback_counts()["jaxdev_test::scale"] == 1
    jaxdev.reset_fallback_counts()
    assert jaxdev.fallback_counts() == {}


def test_ops_with_jax_kernels_do_not_count(fallback_mode):
    fallback_mode("error")
    x = _x()
    _ = x + 1, x * x, x.sum(), x.t(), x.cpu()
    assert jaxdev.fallback_counts() == {}


def test_inplace_fallback_writes_through_every_alias(fallback_mode):
    fallback_mode("silent")

    def run(device):
        base = _x(device)
        view = base.t()[1:]  # non-contiguous view
        sibling = base[1]
        result = ops.scale_(view, -2.0)
        return base, view, sibling, result is view

    on_jax, on_cpu = run("jax"), run("cpu")
    for a, b in zip(on_jax[:3], on_cpu[:3]):
        assert_same(a, b)
    assert on_jax[3] and on_cpu[3]


def test_inplace_fallback_bumps_version_counter(fallback_mode):
    """The written tensor's version must move, or autograd misses the change (CPU's kernel bumps it)."""
    fallback_mode("silent")
    for device in ("cpu", "jax"):
        base = _x(device)
        before = base._version
        ops.scale_(base[1], 2.0)
        assert base._version > before, f"{device}: in-place fallback left _version at {before}"


def test_out_fallback_writes_into_view(fallback_mode):
    fallback_mode("silent")

    def run(device):
        base = torch.zeros(3, 3, device=device)
        out = base[:2]
        result = ops.scale.out(_x(device), 3.0, out=out)
        return base, result is out

    (jb, jis), (cb, cis) = run("jax"), run("cpu")
    assert_same(jb, cb)
    assert jis and cis


def test_out_fallback_resizes_empty_out(fallback_mode):
    fallback_mode("silent")
    out = torch.empty(0, device="jax")
    result = ops.scale.out(_x(), 2.0, out=out)
    assert result is out
    assert_same(out, _x("cpu") * 2)


def test_multiple_outputs_and_non_tensor_results(fallback_mode):
    fallback_mode("silent")
    a, b = ops.pair(_x(), _x() * 2)
    ca, cb = ops.pair(_x("cpu"), _x("cpu") * 2)
    assert_same(a, ca)
    assert_same(b, cb)
    assert ops.total(_x()) == ops.total(_x("cpu")) == 15.0


def test_tensor_list_and_optional_arguments(fallback_mode):
    fallback_mode("silent")
    xs = [_x(), _x() + 1, _x() * 2]
    cxs = [_x("cpu"), _x("cpu") + 1, _x("cpu") * 2]
    assert_same(ops.stack_sum(xs), ops.stack_sum(cxs))
    assert_same(ops.stack_sum(xs, bias=torch.ones(3, device="jax")), ops.stack_sum(cxs, bias=torch.ones(3)))


def test_mixed_devices_in_fallback_name_both_devices(fallback_mode):
    fallback_mode("silent")
    with pytest.raises(RuntimeError) as info:
        ops.pair(_x(), _x("cpu"))
    assert "jax:0" in str(info.value) and "cpu" in str(info.value)


def test_zero_dim_cpu_tensor_is_a_scalar_in_fallback(fallback_mode):
    fallback_mode("silent")
    a, _ = ops.pair(_x(), torch.tensor(2.0))
    assert_same(a, _x("cpu") + 2.0)


def test_view_returning_op_keeps_the_alias_or_refuses(fallback_mode):
    """A silent copy would break aliasing: either the result aliases the input, or a clear error."""
    fallback_mode("silent")
    base = _x()
    try:
        row = ops.first_row(base)
    except NotImplementedError as err:
        assert "jaxdev_test::first_row" in str(err)
        return
    row.fill_(-1.0)
    assert_same(base, torch.tensor([[-1.0, -1.0, -1.0], [3.0, 4.0, 5.0]]))


def test_fallback_handles_factories(fallback_mode):
    fallback_mode("silent")
    result = jaxdev.fallback.run_on_cpu(
        torch.ops.aten.tril_indices.default, 3, 3, 0, dtype=torch.int64, device=torch.device("jax")
    )
    assert_same(result, torch.tril_indices(3, 3))
    result = jaxdev.fallback.run_on_cpu(
        torch.ops.aten.full.default,
        [2, 2],
        4.0,
        dtype=torch.float64,
        layout=torch.strided,
        device=torch.device("jax", 0),
        pin_memory=False,
    )
    assert_same(result, torch.full((2, 2), 4.0, dtype=torch.float64))
    result = jaxdev.fallback.run_on_cpu(torch.ops.aten.arange.default, 5, device="jax")
    assert_same(result, torch.arange(5))


def test_factory_through_the_dispatcher(fallback_mode):
    fallback_mode("silent")
    result = torch.triu_indices(3, 4, 1, device="jax")
    assert_same(result, torch.triu_indices(3, 4, 1))
    if "aten::triu_indices" not in registry.KERNELS:
        assert jaxdev.fallback_counts().get("aten::triu_indices", 0) >= 1


def test_aten_op_with_fallback_keeps_autograd(fallback_mode):
    """An aten op that falls back still has its aten autograd formula (grads land on jax)."""
    fallback_mode("silent")

    def run(device):
        x = torch.tensor([0.3, 0.6, 0.9], device=device, requires_grad=True)
        y = torch.special.erfcx(x)  # an op unlikely to have a jax kernel soon
        y.sum().backward()
        return y.detach(), x.grad

    (jy, jg), (cy, cg) = run("jax"), run("cpu")
    assert_same(jy, cy, rtol=1e-6, atol=1e-6)
    assert_same(jg, cg, rtol=1e-6, atol=1e-6)


def test_a_result_keeps_the_layout_cpu_gives_it(fallback_mode):
    """LAPACK's results are column-major on CPU (inv, lu_factor, lstsq): served through the fallback
    (a platform's gap, a TPU's float64 LU), the jax result has CPU's strides, not contiguous ones."""
    fallback_mode("silent")
    a = torch.randn(4, 5, 5)  # float32: a TPU holds float64 in an emulation that is not bit-exact
    got, _ = jaxdev.fallback.run_on_cpu_lacking(torch.ops.aten.linalg_inv_ex.default, "test kernel", (a.to(JAX),), {})
    want, _ = torch.linalg.inv_ex(a)
    assert got.stride() == want.stride() == (25, 1, 5)
    assert_same(got, want)
    plain = jaxdev.fallback.run_on_cpu_lacking(torch.ops.aten.add.Tensor, "test kernel", (a.to(JAX), a.to(JAX)), {})
    assert plain.stride() == (25, 5, 1)
