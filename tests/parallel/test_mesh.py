"""One logical `jax:0` over a mesh (jaxdev/parallel/mesh.py), on 8 virtual CPU devices.

XLA's device count is fixed when JAX starts, so the checks run in one child interpreter with
`XLA_FLAGS=--xla_force_host_platform_device_count=8` (and JAXDEV_FALLBACK=error, except where a
check calls an op on purpose through the CPU fallback); each test below asserts one check's outcome.
Single-device results are computed in the same child by the same kernels on unsharded tensors.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import pytest
from jaxdev_testing import ROOT, no_sockets

CHILD = r"""
import copy, io, json, os, traceback
import torch, jax, jaxdev
from jax.sharding import NamedSharding, PartitionSpec as P

assert jax.device_count() == 8, jax.device_count()
results = {}

def check(fn):
    try:
        fn()
        results[fn.__name__] = "ok"
    except BaseException:
        results[fn.__name__] = traceback.format_exc()
    jaxdev.set_mesh(None)
    return fn

def spec(t):
    s = jaxdev.sharding(t)
    return s.spec if isinstance(s, NamedSharding) else None

def same(a, b):  # jax tensor (any placement) against a jax tensor or CPU tensor: bit-equal
    a, b = a.detach().cpu(), b.detach().cpu()
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    assert torch.equal(a, b), (a - b).abs().max()

torch.manual_seed(0)
A, B = torch.randn(64, 32), torch.randn(32, 16)

@check
def matmul_stays_sharded():
    x1, w1 = A.to("jax"), B.to("jax")
    single = x1 @ w1
    jaxdev.set_mesh({"data": 8})
    x = jaxdev.shard(A.to("jax"), P("data"))
    assert x.device == torch.device("jax", 0) and jaxdev.is_sharded(x)
    assert spec(x) == P("data"), spec(x)
    y = x @ B.to("jax")
    assert spec(y) == P("data"), spec(y)  # checked on the result's jax.Array
    assert len(jaxdev.to_jax(y).sharding.device_set) == 8
    same(y, single)
    # weights sharded on the contracted dim: XLA reduces partial products (order may differ)
    w = jaxdev.shard(B.to("jax"), P("data", None))
    torch.testing.assert_close(((A.to("jax")) @ w).cpu(), single.cpu(), rtol=1e-6, atol=1e-6)

@check
def elementwise_and_reductions():
    x1 = A.to("jax")
    jaxdev.set_mesh({"data": 4, "model": 2})
    x = jaxdev.shard(A.to("jax"), P("data", "model"))
    e = torch.sin(x * 2 + 1).relu()
    assert spec(e) == P("data", "model"), spec(e)
    same(e, torch.sin(x1 * 2 + 1).relu())
    same(x.amax(0), x1.amax(0))
    same(x.argmax(1), x1.argmax(1))
    # sums over a sharded dim add per-shard partial sums: the order of additions differs
    for got, want in [(x.sum(0), x1.sum(0)), (x.sum(1), x1.sum(1)), (x.mean(), x1.mean()), (x.var(0), x1.var(0))]:
        torch.testing.assert_close(got.cpu(), want.cpu(), rtol=1e-6, atol=1e-6)
    assert abs(x.sum().item() - x1.sum().item()) <= 1e-4  # .item() gathers
    assert str(x) == str(x1)  # printing gathers

@check
def views_and_inplace_keep_sharding():
    jaxdev.set_mesh({"data": 8})
    cpu = A.clone()
    x = jaxdev.shard(A.to("jax"), P("data"))
    v = x[:, 1:3]
    assert spec(v) == P("data", None), spec(v)  # a slice reads sharded like its storage
    assert spec(x[8:40:2]) == P("data", None), spec(x[8:40:2])
    v.add_(1)
    cpu[:, 1:3].add_(1)
    assert spec(x) == P("data") and jaxdev.is_sharded(x)
    same(x, cpu)
    assert spec(x.t()) == P(None, "data"), spec(x.t())  # a transposed read stays sharded
    same(x.t(), cpu.t())
    x.mul_(2)
    cpu.mul_(2)
    assert spec(x) == P("data")
    flat = x.view(-1)
    flat[5:9] = 7.0
    cpu.view(-1)[5:9] = 7.0
    assert spec(x) == P("data")
    same(x, cpu)
    x.copy_(torch.ones(64, 32))
    assert spec(x) == P("data")
    same(x, torch.ones(64, 32))
    # autograd through a sharded leaf
    leaf = jaxdev.shard(A.to("jax"), P("data")).requires_grad_()
    (leaf * leaf).sum().backward()
    same(leaf.grad, 2 * A)

@check
def shard_refuses_partial_views_and_needs_a_mesh():
    x = A.to("jax")
    try:
        jaxdev.shard(x, P("data"))
    except RuntimeError as e:
        assert "no mesh" in str(e)
    else:
        raise AssertionError("shard without a mesh did not raise")
    jaxdev.set_mesh({"data": 8})
    try:
        jaxdev.shard(x[1:], P("data"))
    except ValueError as e:
        assert "whole storage" in str(e)
    else:
        raise AssertionError("shard of a partial view did not raise")

@check
def mesh_scope():
    m = jax.sharding.Mesh(jax.devices(), ("data",))
    assert jaxdev.get_mesh() is None
    with jaxdev.mesh(m) as inside:
        assert inside is m and jaxdev.get_mesh() is m
        t = torch.tensor([1.0, 2.0], device="jax")  # host values are replicated over the mesh
        assert spec(t) == P()
        assert len(jaxdev.to_jax(t).sharding.device_set) == 8
    assert jaxdev.get_mesh() is None
    assert jaxdev.set_mesh((2, 4), ("data", "model")).shape == {"data": 2, "model": 4}

@check
def fallback_gathers_and_reshards():
    lib = torch.library.Library("meshtest", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    lib.define("twice_(Tensor(a!) x) -> ()")
    lib.impl("twice", lambda x: x * 2, "CPU")
    lib.impl("twice_", lambda x: (x.mul_(2), None)[1], "CPU")
    os.environ["JAXDEV_FALLBACK"] = "silent"
    try:
        jaxdev.set_mesh({"data": 8})
        x = jaxdev.shard(A.to("jax"), P("data"))
        y = torch.ops.meshtest.twice(x)
        assert spec(y) == P("data"), spec(y)
        same(y, A * 2)
        torch.ops.meshtest.twice_(x)
        assert spec(x) == P("data") and jaxdev.is_sharded(x)
        same(x, A * 2)
        counts = jaxdev.fallback_counts()
        assert counts == {"meshtest::twice": 1, "meshtest::twice_": 1}, counts
    finally:
        os.environ["JAXDEV_FALLBACK"] = "error"
        jaxdev.reset_fallback_counts()

def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

torch.manual_seed(1)
X, Y = torch.randn(64, 16), torch.randint(0, 4, (64,))

def train(n_devices, rules=None, compiled=False, steps=4):
    model = make_model().to("jax")
    if n_devices:
        jaxdev.set_mesh({"data": n_devices})
        jaxdev.distribute(model, rules)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = X.to("jax"), Y.to("jax")
    if n_devices:
        jaxdev.shard(x, P("data"))
        jaxdev.shard(y, P("data"))

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if compiled:
        step = torch.compile(step, backend="jax")
    losses = [step().item() for _ in range(steps)]
    specs = {n: spec(p) for n, p in model.named_parameters()}
    jaxdev.set_mesh(None)
    return losses, specs, model

REF = train(0)[0]

@check
def data_parallel_matches_one_device():
    losses, specs, _ = train(8)
    assert max(abs(a - b) for a, b in zip(losses, REF)) < 1e-5, (losses, REF)
    assert all(s == P() for s in specs.values()), specs

@check
def parameter_sharding_rules():
    losses, specs, _ = train(8, {"0.weight": P("data", None), "2.weight": P(None, "data")})
    assert max(abs(a - b) for a, b in zip(losses, REF)) < 1e-5, (losses, REF)
    want = {"0.weight": P("data", None), "0.bias": P(), "2.weight": P(None, "data"), "2.bias": P()}
    assert specs == want, specs

@check
def compiled_step_keeps_shardings():
    losses, specs, _ = train(8, {"0.weight": P("data", None)}, compiled=True)
    assert max(abs(a - b) for a, b in zip(losses, REF)) < 1e-5, (losses, REF)
    assert specs["0.weight"] == P("data", None), specs

@check
def fused_step_keeps_the_given_specs():
    # Fused eager (the default on an accelerator): a parameter reads the spec it was placed with after a
    # step's program (XLA spells P('data', None) P('data',)), and the step is one program: SGD's
    # foreach calls over sharded storages take the per-tensor loop with its traced numbers inside it.
    import warnings
    with warnings.catch_warnings(), jaxdev.eager_mode("fused"):
        warnings.simplefilter("error")
        losses, specs, _ = train(8, {"0.weight": P("data", None), "2.weight": P(None, "data")})
    assert max(abs(a - b) for a, b in zip(losses, REF)) < 1e-5, (losses, REF)
    assert specs == {"0.weight": P("data", None), "0.bias": P(), "2.weight": P(None, "data"), "2.bias": P()}, specs

@check
def distribute_a_cpu_module():
    jaxdev.set_mesh({"data": 8})
    cpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.BatchNorm1d(32), torch.nn.Linear(32, 4))
    expected = {k: v.clone() for k, v in cpu.state_dict().items()}
    model = jaxdev.distribute(cpu, {"0.weight": P("data", None), "0.bias": P("data")})
    assert model is cpu and isinstance(model[0].weight, torch.nn.Parameter)
    for k, v in model.state_dict().items():
        assert v.device.type == "jax" and jaxdev.is_sharded(v), k
        same(v, expected[k])
    shards = jaxdev.to_jax(model[0].weight).addressable_shards  # placed from the host, 4 rows per device
    assert len(shards) == 8 and all(sh.data.shape == (4, 16) for sh in shards)
    assert spec(model[0].bias) == P("data") and spec(model[2].bias) == P() and spec(model[1].running_mean) == P()


@check
def save_and_load_sharded():
    _, _, trained = train(8, {"0.weight": P("data", None)}, steps=1)
    jaxdev.set_mesh({"data": 8})
    jaxdev.distribute(trained, {"0.weight": P("data", None)})
    buffer = io.BytesIO()
    torch.save(trained.state_dict(), buffer)  # full values
    expected = {k: v.cpu() for k, v in trained.state_dict().items()}
    buffer.seek(0)
    on_cpu = torch.load(buffer, map_location="cpu")
    for k, v in expected.items():
        same(on_cpu[k], v)
    fresh = jaxdev.distribute(make_model().to("jax"), {"0.weight": P("data", None)})
    buffer.seek(0)
    fresh.load_state_dict(torch.load(buffer))  # jax tensors on one device, re-sharded by the copy
    for k, v in fresh.state_dict().items():
        same(v, expected[k])
    assert spec(fresh[0].weight) == P("data", None) and spec(fresh[2].weight) == P()
    twin = copy.deepcopy(fresh)  # parameters are cloned by a kernel: sharded as XLA propagates
    assert spec(twin[0].weight) == P("data", None)
    twin = copy.deepcopy(fresh[0].weight.detach())  # a tensor's storage is cloned with its placement
    assert jaxdev.is_sharded(twin) and spec(twin) == P("data", None)
    fresh.load_state_dict(on_cpu)  # from CPU tensors too
    assert spec(fresh[0].weight) == P("data", None)
    same(fresh[0].weight, expected["0.weight"])

print("RESULTS" + json.dumps(results))
print("REFERENCE" + json.dumps(REF))
"""

CHECKS = [
    "matmul_stays_sharded",
    "elementwise_and_reductions",
    "views_and_inplace_keep_sharding",
    "shard_refuses_partial_views_and_needs_a_mesh",
    "mesh_scope",
    "fallback_gathers_and_reshards",
    "data_parallel_matches_one_device",
    "parameter_sharding_rules",
    "compiled_step_keeps_shardings",
    "fused_step_keeps_the_given_specs",
    "distribute_a_cpu_module",
    "save_and_load_sharded",
]


def _child(code: str, env: dict) -> subprocess.Popen:
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), full.get("PYTHONPATH", "")])
    full.update(env)
    out = tempfile.TemporaryFile()  # noqa: SIM115  (a file, not a pipe: a child never blocks on a full pipe)
    proc = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-c", code], env=full, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
    )
    proc.out = out
    return proc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def children():
    """The 8-device checks, then the two processes of the multi-host run (together: they rendezvous).
    Not all three at once: on 2 cores with a cold compile cache, XLA's collectives in the 8-device child
    waited past their rendezvous timeout while the other children compiled, and aborted it.
    Returns (exit code, output) per child; each group is killed 200 s after its start. Without sockets
    (no_sockets) only the 8-device child runs."""
    port = None if no_sockets() else str(_free_port())
    groups = [
        {
            "mesh": lambda: _child(
                CHILD, {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAXDEV_FALLBACK": "error"}
            )
        },
        {
            f"host{pid}": lambda pid=pid: _child(
                MULTI_HOST,
                {
                    "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
                    "JAXDEV_FALLBACK": "error",
                    "MESH_PID": str(pid),
                    "MESH_PORT": port,
                },
            )
            for pid in range(2)
        },
    ][: 1 if port is None else 2]
    outputs = {}
    for group in groups:
        procs = {name: start() for name, start in group.items()}
        deadline = time.monotonic() + 200
        for name, p in procs.items():
            try:
                code = p.wait(timeout=max(1.0, deadline - time.monotonic()))
                note = ""
            except subprocess.TimeoutExpired:
                p.kill()
                code, note = p.wait(), "\n(killed after 200 s)"
            p.out.seek(0)
            outputs[name] = (code, p.out.read().decode(errors="replace") + note)
            p.out.close()
    return outputs


def _tagged(output: tuple[int, str], tag: str):
    code, text = output
    lines = [line for line in text.splitlines() if line.startswith(tag)]
    assert code == 0 and lines, f"exit {code}:\n" + "\n".join(text.splitlines()[-25:])
    return json.loads(lines[-1][len(tag) :])


@pytest.fixture(scope="module")
def results(children):
    return _tagged(children["mesh"], "RESULTS")


@pytest.mark.parametrize("name", CHECKS)
def test_mesh(results, name):
    assert name in results, f"the child did not run {name}"
    assert results[name] == "ok", results[name]


def test_every_check_is_listed(results):
    assert sorted(results) == sorted(CHECKS)


# --- multi-host: jax.distributed over 2 processes on localhost -------------------------------------

MULTI_HOST = r"""
import json, os, sys
import torch, jax, jaxdev
from jax.sharding import PartitionSpec as P

pid, port = int(os.environ["MESH_PID"]), os.environ["MESH_PORT"]
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid, initialization_timeout=60)
assert jax.process_count() == 2 and jax.device_count() == 4 and jax.local_device_count() == 2

def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

torch.manual_seed(1)
X, Y = torch.randn(64, 16), torch.randint(0, 4, (64,))

def train(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())  # the loss is replicated: every process can read it
    return losses

jaxdev.set_mesh({"data": 4})  # the devices of both processes
model = jaxdev.distribute(make_model())
half = slice(32 * pid, 32 * (pid + 1))
x = jaxdev.from_process_local(X[half], P("data"))  # this process's half of the global batch
y = jaxdev.from_process_local(Y[half], P("data"))
assert x.shape == (64, 16), x.shape
losses = train(model, x, y)
print("RESULT" + json.dumps({"pid": pid, "losses": losses}), flush=True)
jax.distributed.shutdown()
"""


def test_multi_host_data_parallel_matches_one_process(children):
    """2 processes, 2 CPU devices each, one mesh of 4: each process passes half the batch; the losses
    equal one process training on the whole batch (the reference run of the 8-device child)."""
    if no_sockets():
        pytest.skip(no_sockets())
    reference = _tagged(children["mesh"], "REFERENCE")
    results = [_tagged(children[f"host{pid}"], "RESULT") for pid in range(2)]
    for r in results:
        assert max(abs(a - b) for a, b in zip(r["losses"], reference)) < 1e-5, (r, reference)
    assert results[0]["losses"] == results[1]["losses"]
