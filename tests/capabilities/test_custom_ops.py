"""`jaxdev.jax_op` (jaxdev/capabilities/custom_ops.py): JAX functions, Pallas kernels included, as PyTorch operators:
eager (per-op and fused), compiled without a graph break, on a mesh, differentiated, and opcheck'ed."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest
import torch
import torch.nn.functional as F
from jax.experimental import pallas as pl
from jaxdev_testing import describe_exit, run_python

import jaxdev
from jaxdev.capabilities.custom_ops import infer_schema
from jaxdev.fused import recorder

pytestmark = pytest.mark.usefixtures("no_fallback")
ALL_BUT_AUTOGRAD_REGISTRATION = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")


@jaxdev.jax_op("jaxdev_test::gelu_tanh")
def gelu_tanh(x: jax.Array, scale: float = 1.0) -> jax.Array:
    return jax.nn.gelu(x * scale, approximate=True)


def torch_gelu_tanh(x, scale=1.0):
    return F.gelu(x * scale, approximate="tanh")


@jaxdev.jax_op("jaxdev_test::row_stats")
def row_stats(x, bias: jax.Array | None = None, *, axis: int = -1) -> tuple[jax.Array, jax.Array, jax.Array]:
    if bias is not None:
        x = x + bias
    return x.mean(axis), x.max(axis), jnp.argmax(x, axis)  # the argmax is an integer: no gradient


def torch_row_stats(x, bias=None, axis=-1):
    if bias is not None:
        x = x + bias
    return x.mean(axis), x.amax(axis), x.argmax(axis)


def _double_plus(x_ref, y_ref, o_ref):
    o_ref[...] = 2.0 * x_ref[...] + y_ref[...]


def _pallas_axpy(x, y):
    spec = pl.BlockSpec((4, x.shape[1]), lambda i: (i, 0))  # one block of 4 rows per grid step
    return pl.pallas_call(
        _double_plus,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // 4,),
        in_specs=[spec, spec],
        out_specs=spec,
        interpret=True,  # runs on CPU; a GPU or TPU compiles it
    )(x, y)


pallas_axpy = jaxdev.jax_op("jaxdev_test::pallas_axpy", _pallas_axpy)
pallas_axpy_trained = jaxdev.jax_op("jaxdev_test::pallas_axpy_trained", _pallas_axpy)
torch.library.register_autograd(
    "jaxdev_test::pallas_axpy_trained", lambda ctx, g: (2 * g, g), setup_context=lambda ctx, inputs, output: None
)


def _close(a, b, tol=1e-6):
    torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), rtol=tol, atol=tol)


def test_schema_inferred_from_the_signature():
    assert str(gelu_tanh._opoverload._schema) == "jaxdev_test::gelu_tanh(Tensor x, float scale=1.) -> Tensor"
    assert (
        infer_schema(row_stats.jax_function)
        == "(Tensor x, Tensor? bias=None, *, int axis=-1) -> (Tensor, Tensor, Tensor)"
    )

    def many(x: torch.Tensor, sizes: list[int], flag=True, mode: str = "a", eps: float | None = None):
        return x

    assert infer_schema(many) == '(Tensor x, int[] sizes, bool flag=True, str mode="a", float? eps=None) -> Tensor'


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (lambda *xs: xs[0], r"\*args and \*\*kwargs"),
        (lambda x, table=None: x, "argument 'table'"),
        (lambda x, d: x, None),  # unannotated without default: a tensor (accepted)
    ],
)
def test_signature_refusals(fn, words):
    if words is None:
        assert infer_schema(fn) == "(Tensor x, Tensor d) -> Tensor"
        return
    with pytest.raises(TypeError, match=words):
        jaxdev.jax_op("jaxdev_test::refused", fn)


def test_schema_refusals():
    def f(x: jax.Array, table: dict) -> jax.Array:
        return x

    with pytest.raises(TypeError, match=r"argument 'table' .* is not a tensor"):
        jaxdev.jax_op("jaxdev_test::refused", f)

    def g(x: jax.Array) -> None:
        return None

    with pytest.raises(TypeError, match="return annotation"):
        jaxdev.jax_op("jaxdev_test::refused", g)
    for schema, words in [
        ("(Tensor(a!) x) -> Tensor", "functional"),
        ("(int n) -> Tensor", "needs a tensor argument"),
        ("(Tensor x, *, Tensor y) -> Tensor", "keyword-only"),
        ("(Tensor[] xs) -> Tensor", "not supported"),
        ("(Tensor x) -> int", "returns one or more new tensors"),
        ("(Tensor x -> Tensor", "does not parse"),
    ]:
        with pytest.raises(ValueError, match=words):
            jaxdev.jax_op("jaxdev_test::refused", lambda x: x, schema=schema)
    with pytest.raises(ValueError, match="'namespace::name'"):
        jaxdev.jax_op("no_namespace", lambda x: x)


@pytest.mark.parametrize("device", ["jax", "cpu"])
def test_eager_values_and_dtypes(device):
    x = torch.randn(5, 7, dtype=torch.float64)
    y = gelu_tanh(x.to(device), 1.5)
    assert y.device.type == device and y.dtype == torch.float64
    _close(y, torch_gelu_tanh(x, 1.5))
    b = torch.randn(7)
    xf = x.float()
    for got, want in zip(row_stats(xf.to(device), b.to(device), axis=0), torch_row_stats(xf, b, axis=0)):
        assert got.device.type == device and got.dtype == want.dtype
        _close(got, want)
    for got, want in zip(row_stats(xf.to(device)), torch_row_stats(xf)):
        _close(got, want)


def test_explicit_schema_and_redefinition():
    op = jaxdev.jax_op(
        "jaxdev_test::scaled", lambda a, alpha: a * alpha, schema="(Tensor a, float alpha=2.0) -> Tensor"
    )
    x = torch.arange(4.0)
    _close(op(x.to("jax")), x * 2)
    op = jaxdev.jax_op(
        "jaxdev_test::scaled", lambda a, alpha: a - alpha, schema="(Tensor a, float alpha=2.0) -> Tensor"
    )
    _close(op(x.to("jax"), 1.0), x - 1)  # a new definition replaces the old one, kernels included
    wrong = jaxdev.jax_op("jaxdev_test::two_results", lambda a: (a, a))
    with pytest.raises(TypeError, match="returned 2 arrays where its schema has 1 result"):
        wrong(x.to("jax"))


@pytest.mark.parametrize("device", ["jax", "cpu"])
def test_backward_matches_torch(device):
    x = torch.randn(4, 6)
    b = torch.randn(6)
    mine = [t.to(device, copy=True).requires_grad_() for t in (x, b)]
    ref = [t.detach().clone().requires_grad_() for t in (x, b)]
    mean, top, _ = row_stats(*mine, axis=-1)
    (gelu_tanh(mean, 0.7).sum() + top.square().sum()).backward()
    rmean, rtop, _ = torch_row_stats(*ref, axis=-1)
    (torch_gelu_tanh(rmean, 0.7).sum() + rtop.square().sum()).backward()
    for m, r in zip(mine, ref):
        assert m.grad.device.type == device
        _close(m.grad, r.grad, 1e-5)
    x = mine[0].detach().requires_grad_()
    row_stats(x)[0].sum().backward()  # the optional tensor not given: no gradient asked for it
    _close(x.grad, torch.full_like(x, 1 / 6).cpu())


def test_complex_gradients_follow_pytorch():
    # PyTorch's gradient is the conjugate of JAX's cotangent; abs is not holomorphic
    op = jaxdev.jax_op(
        "jaxdev_test::complex_fn", lambda z: z * z * jnp.sin(z) + jnp.abs(z), schema="(Tensor z) -> Tensor"
    )
    z, g = torch.randn(5, dtype=torch.complex128), torch.randn(5, dtype=torch.complex128)
    mine, ref = z.to("jax").requires_grad_(), z.clone().requires_grad_()
    op(mine).backward(g.to("jax"))
    (ref * ref * ref.sin() + ref.abs()).backward(g)
    _close(mine.grad, ref.grad, 1e-12)


def test_backward_against_finite_differences():
    x = torch.randn(3, 4, dtype=torch.float64, device="jax", requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: gelu_tanh(t, 1.3), (x,))
    assert torch.autograd.gradcheck(lambda t: row_stats(t, axis=0)[0], (x,))


def test_user_autograd_replaces_the_vjp():
    op = jaxdev.jax_op("jaxdev_test::custom_grad", lambda x: jnp.sin(x), schema="(Tensor x) -> Tensor")
    torch.library.register_autograd(
        "jaxdev_test::custom_grad", lambda ctx, g: g * 7, setup_context=lambda ctx, inputs, output: None
    )
    x = torch.randn(3, device="jax", requires_grad=True)
    op(x).sum().backward()
    _close(x.grad, torch.full((3,), 7.0))


def test_fused_eager_records_the_op_and_its_vjp():
    x = torch.randn(4, 6, device="jax", requires_grad=True)
    recorder.STATS.reset()
    with jaxdev.eager_mode("fused"):
        y = gelu_tanh(x, 2.0) * 3
        loss = y.sum()
        assert recorder.STATS.recorded >= 3 and recorder.STATS.flushes == 0  # nothing ran yet
        loss.backward()
        grad = x.grad.cpu()  # a host read: flushes
        assert recorder.STATS.flushes >= 1
        value = y.cpu()
    eager = {name for name, _ in recorder.STATS.eager}
    assert not {n for n in eager if "jaxdev_test" in n or "jaxdev_vjp" in n}, recorder.STATS.eager
    xc = x.detach().cpu().requires_grad_()
    ref = torch_gelu_tanh(xc, 2.0) * 3
    ref.sum().backward()
    _close(value, ref, 1e-5)
    _close(grad, xc.grad, 1e-5)


def test_fused_training_loop_matches_per_op():
    def losses(mode):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 1)).to("jax")
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        x, y = torch.randn(32, 8, device="jax"), torch.randn(32, 1, device="jax")
        out = []
        with jaxdev.eager_mode(mode):
            for _ in range(4):
                opt.zero_grad()
                loss = (model[1](gelu_tanh(model[0](x))) - y).square().mean()
                loss.backward()
                opt.step()
                out.append(loss.item())
        return out

    per_op = losses("op")
    recorder.STATS.reset()
    fused = losses("fused")
    assert recorder.STATS.programs <= 3, recorder.STATS.programs  # the step compiles once, then replays
    assert fused == pytest.approx(per_op, rel=1e-6)


def _counting_backend(graphs):
    jax_backend = torch._dynamo.lookup_backend("jax")

    def backend(gm, example_inputs):
        graphs.append(gm)
        return jax_backend(gm, example_inputs)

    return backend


def test_compiled_without_graph_break():
    torch._dynamo.reset()

    def step(x, b):
        mean, top, index = row_stats(x, b, axis=1)
        return gelu_tanh(mean * top, 0.5).sum() + index.sum()

    x = torch.randn(4, 6, device="jax", requires_grad=True)
    b = torch.randn(6, device="jax")
    explained = torch._dynamo.explain(step)(x, b)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    graphs = []
    compiled = torch.compile(step, backend=_counting_backend(graphs), fullgraph=True)
    out = compiled(x, b)
    out.backward()
    assert len(graphs) == 1 and "jaxdev_test.row_stats" in graphs[0].code and "gelu_tanh" in graphs[0].code
    grad = x.grad.clone()
    x.grad = None
    eager = step(x, b)
    eager.backward()
    _close(out, eager, 1e-5)
    _close(grad, x.grad, 1e-5)


def test_opcheck():
    for device in ("cpu", "jax"):
        # PyTorch's autograd_registration_check knows CPU, CUDA and XPU only ("NYI devices other than ...").
        utils = None if device == "cpu" else ALL_BUT_AUTOGRAD_REGISTRATION
        x = torch.randn(3, 5, device=device, requires_grad=True)
        b = torch.randn(5, device=device)
        torch.library.opcheck(gelu_tanh, (x, 0.5), test_utils=utils or torch.library._OPCHECK_DEFAULT_UTILS)
        torch.library.opcheck(row_stats, (x, b), {"axis": 0}, test_utils=utils or torch.library._OPCHECK_DEFAULT_UTILS)
        vjp = torch.ops.jaxdev_vjp.jaxdev_test__gelu_tanh.default
        torch.library.opcheck(
            vjp,
            (torch.ones(3, 5, device=device), x.detach(), 0.5, [True]),
            test_utils=utils or torch.library._OPCHECK_DEFAULT_UTILS,
        )


def test_pallas_kernel():
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    want = 2 * x + y
    _close(pallas_axpy(x.to("jax"), y.to("jax")), want)
    _close(pallas_axpy(x, y), want)  # CPU tensors: JAX's CPU backend
    compiled = torch.compile(lambda a, c: pallas_axpy(a, c).relu(), backend="jax", fullgraph=True)
    _close(compiled(x.to("jax"), y.to("jax")), want.relu())
    with jaxdev.eager_mode("fused"):
        fused = pallas_axpy(x.to("jax"), y.to("jax")) + 1
    _close(fused, want + 1)
    torch.library.opcheck(pallas_axpy, (x.to("jax"), y.to("jax")), test_utils=ALL_BUT_AUTOGRAD_REGISTRATION)
    xs = x.to("jax").requires_grad_()
    with pytest.raises(RuntimeError, match=r"JAX cannot differentiate its function.*register_autograd"):
        pallas_axpy(xs, y.to("jax")).sum().backward()
    ys = y.to("jax").requires_grad_()
    pallas_axpy_trained(xs, ys).sum().backward()
    _close(xs.grad, torch.full_like(x, 2.0))
    _close(ys.grad, torch.ones_like(y))


MESH_CHILD = r"""
import json, jax, jax.numpy as jnp, torch, jaxdev
from jax.sharding import NamedSharding, PartitionSpec as P

seen = []

def rows(spec):  # split by rows over "data", whatever trailing Nones the spec spells
    return tuple(spec)[:1] == ("data",) and all(p is None for p in tuple(spec)[1:])

@jaxdev.jax_op("meshtest::row_norm")
def row_norm(x: jax.Array, eps: float = 1e-6) -> jax.Array:
    jax.debug.inspect_array_sharding(x, callback=lambda s: seen.append(rows(s.spec)))  # at trace time
    return x / jnp.sqrt((x * x).sum(-1, keepdims=True) + eps)

torch.manual_seed(0)
host = torch.randn(16, 8)
want = host / (host.square().sum(-1, keepdim=True) + 1e-6).sqrt()
jaxdev.set_mesh({"data": 4})
x = jaxdev.shard(host.to("jax"), P("data")).requires_grad_()
y = row_norm(x)
y.square().sum().backward()
compiled = torch.compile(lambda t: row_norm(t) * 2, backend="jax", fullgraph=True)(x.detach())
print(json.dumps({
    "devices": jax.device_count(),
    "seen": seen,
    "out": rows(jaxdev.sharding(y).spec),
    "grad": rows(jaxdev.sharding(x.grad).spec),
    "compiled": rows(jaxdev.sharding(compiled).spec),
    "error": (y.detach().cpu() - want).abs().max().item(),
    "compiled_error": (compiled.cpu() - 2 * want).abs().max().item(),
}))
"""


def test_runs_on_the_sharded_arrays_of_a_mesh():
    proc = run_python(
        MESH_CHILD,
        env={"XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAXDEV_FALLBACK": "error"},
        timeout=300,
    )
    assert proc.returncode == 0, describe_exit(proc)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["devices"] == 4
    assert got["seen"] and all(got["seen"]), got  # the function traced over row-sharded arrays
    assert got["out"] and got["grad"] and got["compiled"], got  # results stay sharded by rows
    assert got["error"] < 1e-6 and got["compiled_error"] < 1e-6, got
