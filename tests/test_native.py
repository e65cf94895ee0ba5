"""The native fast paths (jaxdev/native.py, jaxdev/csrc/native.cpp): built and in use where a C++
compiler exists, equal to their Python twins, and optional (jaxdev works the same without them)."""

from __future__ import annotations

import shutil

import jax.numpy as jnp
import pytest
import torch
from jaxdev_testing import run_python

import jaxdev
from jaxdev import layout, native, tensor
from jaxdev.ops import registry


def _python_plain_value(t):
    """tensor.read's Python hot path: the box's array when t is its whole storage, else None."""
    box = tensor.BOXES.get(t.untyped_storage().data_ptr())
    if box is None or box.logical is not None:
        return None
    array = box.array
    plain = (
        array.shape == t.shape
        and t.dtype is box.dtype
        and not t.storage_offset()
        and t.is_contiguous()
        and not (t.is_conj() or t.is_neg())
    )
    return array if plain else None


def _samples():
    x = torch.randn(4, 6, device="jax")
    c = torch.randn(3, 3, dtype=torch.complex64, device="jax")
    nchw = torch.randn(2, 3, 4, 5).to("jax").contiguous(memory_format=torch.channels_last)
    return {
        "plain": x,
        "transposed": x.t(),
        "row slice": x[1:],
        "first rows (offset 0, part of storage)": x[:2],
        "column slice": x[:, ::2],
        "expand": torch.randn(1, 6, device="jax").expand(4, 6),
        "reshaped view of the whole storage": x.view(6, 4),
        "dtype view": x.view(torch.int32),
        "conj": c.conj(),
        "neg view": c.conj().imag,
        "channels_last": nchw,
        "size-1 dims with odd strides": torch.randn(10, 3, device="jax")
        .unsqueeze(-1)
        .as_strided((10, 3, 1), (3, 1, 3)),
        "empty": torch.empty(0, 3, device="jax"),
        "0-dim": torch.tensor(2.5, device="jax"),
        "bool": torch.ones(3, dtype=torch.bool, device="jax"),
        "cpu": torch.randn(3),
        "on a storage slice": torch.empty(0, device="jax").set_(x.untyped_storage()[8:24], 0, (4,), (1,)),
    }


# Where no compiler exists the module cannot be built and these have nothing to test (the first test
# below fails instead where one exists and the build failed).
needs_native = pytest.mark.skipif(native.module is None, reason=f"native module not in use: {native.unavailable}")


def test_the_module_is_built_wherever_a_compiler_exists():
    """Not a skip: with a compiler on the machine, a module that failed to build is a failure."""
    if shutil.which("c++") or shutil.which("g++"):
        assert native.module is not None, native.unavailable


@needs_native
@pytest.mark.parametrize("name", list(_samples()))
def test_plain_value_equals_its_python_twin(name):
    t = _samples()[name]
    got = native.module.plain_value(t) if t.device.type == "jax" else None
    want = _python_plain_value(t) if t.device.type == "jax" else None
    if t.device.type == "jax" and type(tensor.box_of(t)) is not tensor.Box:
        want = None  # a storage slice's box computes its array: left to Python
    assert (got is None) == (want is None), name
    if got is not None:
        assert got is want
    assert native.module.plain_value(3) is None


@needs_native
def test_plain_values_gives_up_on_any_view_and_passes_numbers_through():
    s = _samples()
    x = s["plain"]
    values = native.module.plain_values((x, 2.0, None, s["bool"]))
    assert values[0] is jaxdev.to_jax(x) and values[1:3] == [2.0, None] and values[3] is jaxdev.to_jax(s["bool"])
    for name in ("transposed", "row slice", "conj", "cpu", "dtype view"):
        assert native.module.plain_values((x, s[name])) is None, name


@needs_native
@pytest.mark.per_op_mode("the result of a per-op kernel; fused mode records the op, its result's value pending")
def test_a_logical_box_is_left_to_python():
    """A result laid out like PyTorch's (channels_last) holds its logical value: read in Python."""
    y = torch.randn(2, 3, 4, 5, device="jax").contiguous(memory_format=torch.channels_last) + 1
    assert tensor.box_of(y).logical is not None
    assert native.module.plain_value(y) is None
    assert torch.equal(y.cpu(), y.cpu().contiguous())


@needs_native
@pytest.mark.parametrize("name", list(_samples()))
def test_all_plain_equals_layout_plain(name):
    t = _samples()[name]
    assert native.module.all_plain((t,)) == layout.is_plain(t)
    assert native.module.all_plain((1, [t, 2], None)) == layout.is_plain(t)


@needs_native
def test_native_wrap_makes_what_the_python_path_makes():
    t = tensor.wrap(jnp.ones((3, 4), jnp.float32))
    ref = torch._C._acc.create_empty_tensor((3, 4), torch.float32)
    assert t.device == torch.device("jax", 0) and t.stride() == (4, 1) and t.dtype == torch.float32
    assert torch._C._dispatch_keys(t) == torch._C._dispatch_keys(ref)
    assert t.untyped_storage().nbytes() == 48 and not t.requires_grad
    with torch.inference_mode():
        inner = tensor.wrap(jnp.ones((2,), jnp.float32))
        assert inner.is_inference()
        assert torch._C._dispatch_keys(inner) == torch._C._dispatch_keys(
            torch._C._acc.create_empty_tensor((2,), torch.float32)
        )


@needs_native
def test_view_ops_have_a_native_kernel():
    for name in ("aten::as_strided", "aten::view", "aten::_reshape_alias", "aten::unfold"):
        dump = torch._C._dispatch_dump(name)
        line = next(ln for ln in dump.splitlines() if ln.startswith("PrivateUse1"))
        assert "native.cpp" in line, line
        assert name in registry.KERNELS
    from jaxdev.audit import explain

    assert explain.describe("aten::view")["jaxdev"]["kernel"].startswith("native C++ (jaxdev/csrc/native.cpp")


def test_view_errors_and_metadata_are_cpus():
    x = torch.randn(4, 6, device="jax")
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.t().view(24)
    v = x.t().as_strided((3, 2), (1, 6), 2)
    assert v.stride() == (1, 6) and v.storage_offset() == 2 and v._base is x
    assert torch.equal(v.cpu(), x.cpu().t().as_strided((3, 2), (1, 6), 2))


_WORKLOAD = """
import torch, jaxdev
from jaxdev import native
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to("jax")
opt = torch.optim.Adam(m.parameters())
x = torch.randn(5, 8).to("jax")
for _ in range(3):
    loss = m(x).logsumexp(-1).mean()
    opt.zero_grad(); loss.backward(); opt.step()
y = torch.arange(24.0, device="jax").view(4, 6)
parts = [y.t() @ y, y[:, ::2].exp().sum(0), y.unfold(1, 2, 2).sum(-1), y.diagonal().neg(), y.view(torch.int32)[0]]
print("NATIVE", native.module is not None, native.unavailable)
print("LOSS", repr(loss.item()))
print("PARTS", [p.cpu().tolist() for p in parts])
"""


def _run_workload(**env):
    out = run_python(_WORKLOAD, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = dict(ln.split(" ", 1) for ln in out.stdout.splitlines())
    return lines, out.stderr


@needs_native
def test_without_the_module_jaxdev_computes_the_same():
    with_native, _ = _run_workload()
    without, _ = _run_workload(JAXDEV_NATIVE="off")
    assert with_native["NATIVE"].startswith("True")
    assert without["NATIVE"] == "False turned off by JAXDEV_NATIVE=off"
    assert with_native["LOSS"] == without["LOSS"] and with_native["PARTS"] == without["PARTS"]


def test_a_failed_build_warns_once_and_jaxdev_runs_in_python(tmp_path):
    lines, stderr = _run_workload(JAXDEV_NATIVE_DIR=str(tmp_path), CXX="/bin/false", PATH=str(tmp_path))
    assert lines["NATIVE"].startswith("False the C++ compiler failed")
    assert stderr.count("runs without its native fast paths") == 1


@needs_native
@pytest.mark.per_op_mode("the box of a per-op result; fused mode records the op, its box pending")
def test_a_dead_results_box_goes_when_its_storage_dies():
    x = torch.arange(6.0, device="jax") + 1
    address = x.untyped_storage().data_ptr()
    assert type(tensor.BOXES[address]) is tensor.Box
    native.module.drop_dead()
    assert address in tensor.BOXES  # alive: kept
    del x
    native.module.drop_dead()
    assert address not in tensor.BOXES


@needs_native
def test_a_storage_freed_by_backward_leaves_no_box():
    """Backward frees saved tensors (on autograd's device thread, without the GIL held): their boxes go."""
    x = torch.randn(8, 16, device="jax", requires_grad=True)
    h = torch.tanh(x * 2)  # tanh saves its result for backward
    address = h.untyped_storage().data_ptr()
    loss = h.sum()
    del h
    native.module.drop_dead()
    assert address in tensor.BOXES
    loss.backward()
    del loss
    native.module.drop_dead()
    assert address not in tensor.BOXES


@needs_native
def test_training_steps_leave_no_boxes_behind():
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).to("jax")
    x = torch.randn(8, 16, device="jax")
    sizes = []
    for _ in range(40):
        m.zero_grad(set_to_none=True)
        m(x).square().mean().backward()
        tensor.sweep()
        sizes.append(len(tensor.BOXES))
    assert max(sizes[10:]) == sizes[9], sizes


@needs_native
def test_a_storage_resized_in_place_keeps_its_values_and_drops_its_old_box():
    x = torch.arange(4.0, device="jax") * 1
    old = x.untyped_storage().data_ptr()
    x.untyped_storage().resize_(24)
    native.module.drop_dead()
    assert old not in tensor.BOXES and x.untyped_storage().data_ptr() in tensor.BOXES
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert torch.empty(0, device="jax").set_(x.untyped_storage(), 0, (6,), (1,)).tolist()[:4] == [0.0, 1.0, 2.0, 3.0]


@needs_native
def test_a_fresh_build_is_announced_once_and_then_reused(tmp_path):
    """Built from the source into an empty directory (not the cache this machine already has)."""
    first, stderr = _run_workload(JAXDEV_NATIVE_DIR=str(tmp_path))
    assert first["NATIVE"].startswith("True") and stderr.count("building its native fast paths") == 1
    again, stderr = _run_workload(JAXDEV_NATIVE_DIR=str(tmp_path))
    assert again["NATIVE"].startswith("True") and "building" not in stderr
    assert [p.name for p in tmp_path.iterdir()] == [native._key()]


_FAST_CASES = {
    "same dtype": lambda d: (torch.randn(3, 4, device=d), torch.randn(3, 4, device=d)),
    "broadcast": lambda d: (torch.randn(3, 1, device=d), torch.randn(4, device=d)),
    "int": lambda d: (torch.arange(12, device=d).view(3, 4), torch.arange(1, 13, device=d).view(3, 4)),
    "bool": lambda d: (torch.ones(3, dtype=torch.bool, device=d), torch.zeros(3, dtype=torch.bool, device=d)),
    "mixed dtypes": lambda d: (torch.randn(3, device=d), torch.arange(3, device=d)),
    "half": lambda d: (torch.randn(5, device=d).half(), torch.randn(5, device=d).half()),
    "complex": lambda d: (
        torch.randn(3, dtype=torch.complex64, device=d),
        torch.randn(3, dtype=torch.complex64, device=d),
    ),
    "a view": lambda d: (torch.randn(4, 3, device=d).t(), torch.randn(3, 4, device=d)),
    "empty": lambda d: (torch.randn(0, 3, device=d), torch.randn(0, 3, device=d)),
    "0-dim cpu scalar": lambda d: (torch.randn(3, device=d), torch.tensor(2.0)),
}


@needs_native
@pytest.mark.parametrize("case", list(_FAST_CASES))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "exp", "neg", "lt", "eq", "atan2", "logical_and", "isnan"])
def test_native_fast_kernels_equal_cpu(case, op):
    """The C++ fast path (plain tensors of one dtype, default arguments; comparisons and isnan give bool,
    atan2 of integers a float) and its Python slow path give CPU's dtype, shape, strides and values, or
    CPU's error."""
    torch.manual_seed(0)
    cpu_args = _FAST_CASES[case]("cpu")
    jax_args = [a.to("jax") if a.dim() or case != "0-dim cpu scalar" else a for a in cpu_args]
    fn = getattr(torch, op)
    nargs = 1 if op in ("exp", "neg", "isnan") else 2
    try:
        want = fn(*cpu_args[:nargs])
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=str(e)[:40].replace("(", r"\(").replace(")", r"\)")):
            fn(*jax_args[:nargs])
        return
    got = fn(*jax_args[:nargs])
    assert (got.dtype, got.shape, got.stride()) == (want.dtype, want.shape, want.stride())
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)


@needs_native
def test_native_fast_kernels_take_the_slow_path_for_other_arguments():
    a, b = torch.randn(3, device="jax"), torch.randn(3, device="jax")
    torch.testing.assert_close(torch.add(a, b, alpha=2).cpu(), a.cpu() + 2 * b.cpu())
    torch.testing.assert_close(torch.sub(a, b, alpha=0.5).cpu(), a.cpu() - 0.5 * b.cpu())
    with pytest.raises(RuntimeError, match="must match the size"):
        torch.randn(3, device="jax") + torch.randn(4, device="jax")
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors"):
        torch.ones(2, dtype=torch.bool, device="jax") - torch.ones(2, dtype=torch.bool, device="jax")
    x = torch.randn(3, device="jax", requires_grad=True)
    ((x * x).exp() + x).sum().backward()  # the fast kernels under autograd, backward on its thread
    torch.testing.assert_close(x.grad.cpu(), (2 * x.detach().cpu() * (x.detach().cpu() ** 2).exp() + 1))
    for name in ("aten::add.Tensor", "aten::mul.Tensor", "aten::exp", "aten::lt.Tensor", "aten::isnan"):
        line = next(ln for ln in torch._C._dispatch_dump(name).splitlines() if ln.startswith("PrivateUse1"))
        assert "native.cpp" in line, line


_CLONES = {
    "clone": lambda t: t.clone(),
    "contiguous": lambda t: t.contiguous(),
    "clone contiguous_format": lambda t: t.clone(memory_format=torch.contiguous_format),
    "clone channels_last": lambda t: t.clone(memory_format=torch.channels_last) if t.dim() == 4 else t.clone(),
}


@needs_native
@pytest.mark.parametrize("name", [n for n in _samples() if n != "cpu"])
@pytest.mark.parametrize("how", list(_CLONES))
def test_native_clone_equals_cpu(name, how):
    """The C++ clone (the same array for a plain tensor, a cached read program for a view, Python for
    the rest) gives CPU's values, strides and dtype, and a tensor of its own."""
    t = _samples()[name]
    t_cpu = t.cpu()
    got, want = _CLONES[how](t), _CLONES[how](t_cpu)
    assert (got.dtype, got.shape, got.stride()) == (want.dtype, want.shape, want.stride())
    assert torch.equal(got.cpu(), want)
    # `.contiguous()` of a contiguous tensor is the tensor; everything else is a tensor of its own.
    assert (got is t) == (how == "contiguous" and t.is_contiguous())
    if got is not t and got.numel():
        got.zero_()  # writes to the clone stay there
        assert torch.equal(t.cpu(), t_cpu)


@needs_native
def test_native_clone_reads_views_at_every_offset_and_after_writes():
    x = torch.arange(40.0).view(8, 5).to("jax")
    for i in range(8):  # one geometry, eight offsets: each read at its own offset
        assert torch.equal(x[i:, 1:].contiguous().cpu(), torch.arange(40.0).view(8, 5)[i:, 1:])
    v = x.t()
    first = v.contiguous()
    x.mul_(2)  # the storage changes: the next read sees it, the earlier clone does not
    assert torch.equal(v.contiguous().cpu(), (torch.arange(40.0).view(8, 5) * 2).t())
    assert torch.equal(first.cpu(), torch.arange(40.0).view(8, 5).t())
    line = next(ln for ln in torch._C._dispatch_dump("aten::clone").splitlines() if ln.startswith("PrivateUse1"))
    assert "native.cpp" in line, line


@needs_native
@pytest.mark.per_op_mode("per-op clone's native path; fused mode records the clone")
def test_native_clone_of_a_sharded_storage_takes_the_python_path(monkeypatch):
    from jaxdev import tensor
    from jaxdev.core import placement

    calls = []
    x = torch.randn(4, 4, device="jax")
    box = tensor.box_of(x)
    monkeypatch.setitem(tensor.SHARDED, box, (tuple(box.array.shape), box.array.sharding))
    previous = placement.set_view_sharding(lambda *a: calls.append(a) or None)
    try:
        assert torch.equal(x.t().contiguous().cpu(), x.cpu().t().contiguous())
    finally:
        placement.set_view_sharding(previous)
    assert calls  # the Python read asked for the view's sharding
