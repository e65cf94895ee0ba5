"""torch.distributed on jax tensors (jaxdev/parallel/distributed.py): the process-group backend "jax". Two
processes on localhost (bounded in time) with jax.distributed initialized too, so both routes run:
gloo on host copies and XLA collectives. Collectives on jax tensors, and `DistributedDataParallel`
over an MLP on jax matching one process's training within 1e-5, by each route."""

from __future__ import annotations

import sys

import pytest
import torch.distributed as dist
from jaxdev_testing import run_ranks

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built")

RANK = r"""
import datetime, json, os, time
import torch, jaxdev
import torch.distributed as dist

rank, port = int(os.environ["DDP_RANK"]), os.environ["DDP_PORT"]
import jax
from jaxdev.parallel import distributed as jd

jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"127.0.0.1:{os.environ['JAX_PORT']}", num_processes=2, process_id=rank, initialization_timeout=60)
dist.init_process_group(
    "jax", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=90)
)
assert dist.get_backend() == "jax"
out = {}

pg = dist.group.WORLD
out["xla_available"] = pg.via == "xla"  # jax.distributed spans the group: XLA collectives
xla_calls = []
original_run = jd._XlaCollectives.run
jd._XlaCollectives.run = lambda self, *a: (xla_calls.append(a[1]), original_run(self, *a))[1]
for via in ("gloo", "xla"):
    pg.via = via
    t = torch.tensor([1.0, 2.0, -3.0], device="jax") * (rank + 1)
    view = t[1:]  # an alias: it must see the reduced values
    dist.all_reduce(t)
    out[via + "_all_reduce"] = t.cpu().tolist()
    out[via + "_alias"] = view.cpu().tolist()
    m = torch.tensor([4, -7], device="jax") * (rank + 1)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    out[via + "_all_reduce_max_int"] = [m.dtype == torch.int64] + m.cpu().tolist()
    b = torch.arange(4.0, device="jax") + 10 * rank
    dist.broadcast(b, src=1)
    out[via + "_broadcast"] = b.cpu().tolist()
    out[via + "_calls"] = len(xla_calls)
pg.via = "gloo"
parts = [torch.zeros(2, device="jax") for _ in range(2)]
dist.all_gather(parts, torch.tensor([rank, rank + 0.5], device="jax"))
out["all_gather"] = [p.cpu().tolist() for p in parts]
flat = torch.zeros(4, device="jax")
dist.all_gather_into_tensor(flat, torch.tensor([rank, rank + 0.5], device="jax"))
out["all_gather_into_tensor"] = flat.cpu().tolist()
rs = torch.zeros(2, device="jax")
dist.reduce_scatter_tensor(rs, torch.arange(4.0, device="jax") * (rank + 1))
out["reduce_scatter_tensor"] = rs.cpu().tolist()
if rank == 0:
    dist.send(torch.tensor([7.0, 8.0], device="jax"), dst=1)
else:
    got = torch.zeros(2, device="jax")
    dist.recv(got, src=0)
    out["recv"] = got.cpu().tolist()
import warnings
import torch.distributed._functional_collectives as funcol
out["funcol"] = funcol.all_reduce(t, "sum", dist.group.WORLD).cpu().tolist()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    compiled = torch.compile(lambda x: funcol.all_reduce(x * 2, "sum", dist.group.WORLD) + 1, backend="jax")
    out["funcol_compiled"] = compiled(t).cpu().tolist()
out["funcol_compiled_eager"] = any("runs op by op" in str(w.message) for w in caught)

# On the XLA route a compiled graph's functional collectives run inside its one XLA program
# (jaxdev/parallel/compiled_collectives.py): the ops, and a DDP-style step (grads, their all_reduce, the update).
from jaxdev.graphs import program as jp
began = time.monotonic()
WORLD = dist.group.WORLD

def collectives(x):
    reduced = [funcol.all_reduce(x * 2, op, WORLD) for op in ("sum", "avg", "max", "min", "product")]
    scattered = [funcol.reduce_scatter_tensor(x, op, 0, WORLD) for op in ("sum", "avg", "max")]
    others = [funcol.all_gather_tensor(x + 1, 0, WORLD), funcol.broadcast(x, 1, WORLD), funcol.all_reduce(x.sum(), "sum", WORLD)]
    others.append(funcol.all_to_all_single(x, None, None, WORLD))
    # with the gather and the sum scatter above: each pair runs as one collective (collectives._buckets)
    others += [funcol.all_gather_tensor(x, 0, WORLD), funcol.reduce_scatter_tensor(x, "sum", 0, WORLD)]
    return reduced + scattered + others

model_f = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to("jax")

def loss_f(params, x, y):
    return torch.nn.functional.cross_entropy(torch.func.functional_call(model_f, params, (x,)), y)

def ddp_step(params, x, y):
    grads, loss = torch.func.grad_and_value(loss_f)(params, x, y)
    avg = lambda g: funcol.all_reduce(g, "avg", WORLD)
    return {k: p - 0.1 * avg(grads[k]) for k, p in params.items()}, avg(loss)

def run_steps(step, x, y):
    params = {k: p.detach() for k, p in model_f.named_parameters()}
    losses = []
    for _ in range(3):
        params, loss = step(params, x, y)
        losses.append(loss.item())
    return losses, params

x = (torch.arange(8.0, device="jax").view(4, 2) - 3) * (rank + 1.5)
torch.manual_seed(1)
X8, Y8 = torch.randn(8, 16, device="jax"), torch.randint(0, 4, (8,), device="jax")
mine = slice(4 * rank, 4 * rank + 4)
def expected_collectives(rank):
    # What `collectives` gives on `rank`, from both ranks' x (exact in float32), computed here: the
    # CPU route through gloo's asynchronous functional collectives once hung a CI run (gloo's, not ours).
    xs = [(torch.arange(8.0).view(4, 2) - 3) * (r + 1.5) for r in range(2)]
    both = torch.stack(xs)
    folds = {"sum": both.sum(0), "avg": both.sum(0) / 2, "max": both.amax(0), "min": both.amin(0), "product": both.prod(0)}
    reduced = [2 * folds[op] if op != "product" else 4 * folds[op] for op in ("sum", "avg", "max", "min", "product")]
    scattered = [folds[op].chunk(2)[rank] for op in ("sum", "avg", "max")]
    others = [torch.cat([x + 1 for x in xs]), xs[1], both.sum(), torch.cat([x.chunk(2)[rank] for x in xs])]
    return reduced + scattered + others + [torch.cat(xs), folds["sum"].chunk(2)[rank]]

pg.via = "gloo"  # the eager reference: the step on jax by host copies through gloo
host_values = expected_collectives(rank)
eager = run_steps(ddp_step, X8[mine], Y8[mine])
pg.via = "xla"
programs, calls = jp.STATS.programs, jp.STATS.calls
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    values = [t.cpu() for t in torch.compile(collectives, backend="jax")(x)]
    compiled = run_steps(torch.compile(ddp_step, backend="jax"), X8[mine], Y8[mine])
out["xla_compiled"] = {
    "programs": jp.STATS.programs - programs,
    "graph_calls": jp.STATS.calls - calls,
    "op_by_op": [str(w.message) for w in caught if "runs op by op" in str(w.message)],
    "values_vs_cpu": max((a - b).abs().max().item() for a, b in zip(values, host_values)),
    "shapes_as_cpu": [a.shape for a in values] == [b.shape for b in host_values],
    "sum": values[0].tolist(),
    "losses": compiled[0],
    "losses_vs_eager": max(abs(a - b) for a, b in zip(compiled[0], eager[0])),
    "weights_vs_eager": max((compiled[1][k] - eager[1][k]).abs().max().item() for k in eager[1]),
    "seconds": time.monotonic() - began,
}
cpu = torch.tensor([rank + 1.0])  # CPU tensors go through the same group
dist.all_reduce(cpu)
out["cpu_all_reduce"] = cpu.tolist()

def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

torch.manual_seed(1)
X, Y = torch.randn(64, 16), torch.randint(0, 4, (64,))

def train(model, x, y, reduce):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss = loss.detach().clone()
        if reduce:
            dist.all_reduce(loss)
            loss /= 2
        losses.append(loss.item())
    return losses

out["reference"] = train(make_model().to("jax"), X.to("jax"), Y.to("jax"), reduce=False)
half = slice(32 * rank, 32 * (rank + 1))
for via in ("gloo", "xla"):
    pg.via = via
    before = len(xla_calls)
    ddp = torch.nn.parallel.DistributedDataParallel(make_model().to("jax"))
    out[via + "_ddp"] = train(ddp, X[half].to("jax"), Y[half].to("jax"), reduce=True)
    out[via + "_weights"] = ddp.module[0].weight.detach().cpu().sum().item()
    out[via + "_ddp_xla_calls"] = len(xla_calls) - before
out["fallbacks"] = jaxdev.fallback_counts()
dist.destroy_process_group()
print("RESULT" + json.dumps(out), flush=True)
jax.distributed.shutdown()
os._exit(0)  # JAX's atexit clean_up (clear_backends) can hang after shutdown (tests/parallel/distributed_fsdp_rank.py)
"""


@pytest.fixture(scope="module")
def ranks():
    return run_ranks([sys.executable, "-c", RANK], deadline_s=240)


@pytest.mark.parametrize("via", ["gloo", "xla"])
def test_all_reduce_and_broadcast(ranks, via):
    for r in ranks:
        assert r["xla_available"]
        assert r[via + "_all_reduce"] == [3.0, 6.0, -9.0]
        assert r[via + "_alias"] == [6.0, -9.0]
        assert r[via + "_all_reduce_max_int"] == [True, 8, -7]
        assert r[via + "_broadcast"] == [10.0, 11.0, 12.0, 13.0]
        assert r[via + "_calls"] == (0 if via == "gloo" else 3)  # host copies, or XLA programs


def test_collectives_on_jax_tensors(ranks):
    for rank, r in enumerate(ranks):
        assert r["all_gather"] == [[0.0, 0.5], [1.0, 1.5]]
        assert r["all_gather_into_tensor"] == [0.0, 0.5, 1.0, 1.5]
        assert r["reduce_scatter_tensor"] == [[0.0, 3.0], [6.0, 9.0]][rank]
        assert r["cpu_all_reduce"] == [3.0]
        assert r["funcol"] == [6.0, 12.0, -18.0]  # the functional collectives, eagerly
        # inside torch.compile(backend="jax") on the gloo route they run eagerly: that graph runs op by op
        assert r["funcol_compiled"] == [13.0, 25.0, -35.0] and r["funcol_compiled_eager"]
        assert r["fallbacks"] == {}, rank
    assert ranks[1]["recv"] == [7.0, 8.0]


@pytest.mark.parametrize("via", ["gloo", "xla"])
def test_ddp_matches_one_process(ranks, via):
    for r in ranks:
        assert max(abs(a - b) for a, b in zip(r[via + "_ddp"], r["reference"])) < 1e-5, r
        assert (r[via + "_ddp_xla_calls"] > 0) == (via == "xla")  # DDP's reducer took that route
    assert ranks[0][via + "_ddp"] == ranks[1][via + "_ddp"]
    assert ranks[0][via + "_weights"] == ranks[1][via + "_weights"]  # the replicas stayed identical


def test_compiled_collectives_inside_one_program(ranks):
    """XLA route: a compiled graph's functional collectives (all_reduce sum/avg/max/min/product and of a
    0-d tensor, reduce_scatter sum/avg/max, all_gather, broadcast, all_to_all_single; all_reduces,
    gathers and scatters bucketed into one collective each) run inside its XLA program (one program,
    no graph op by op), with the values computed on CPU from both ranks' inputs; a DDP-style step compiled whole
    (grads by torch.func, their all_reduce, the update) is one program over 3 steps and trains as
    the same step eagerly."""
    for r in ranks:
        c = r["xla_compiled"]
        assert c["op_by_op"] == [] and c["programs"] == 2 and c["graph_calls"] == 4, c
        assert c["values_vs_cpu"] == 0.0 and c["shapes_as_cpu"], c
        assert c["sum"] == [[-24.0, -16.0], [-8.0, 0.0], [8.0, 16.0], [24.0, 32.0]]
        assert c["losses_vs_eager"] < 1e-6 and c["weights_vs_eager"] < 1e-6, c
    # each rank trained on its own half of the batch: equal losses mean the all_reduce took place
    assert ranks[0]["xla_compiled"]["losses"] == ranks[1]["xla_compiled"]["losses"]


def test_run_compiled_compiles_once_per_signature():
    """jaxdev.parallel.distributed.run_compiled (the compile-then-barrier step of collective programs): one
    executable per argument signature, the jitted program's values. No jax.distributed here: no barrier."""
    import jax
    import jax.numpy as jnp

    from jaxdev.parallel import distributed

    program, compiled = jax.jit(lambda x, y: x * 2 + y), {}
    assert distributed.run_compiled(program, compiled, jnp.arange(3.0), jnp.float32(1)).tolist() == [1.0, 3.0, 5.0]
    assert distributed.run_compiled(program, compiled, jnp.ones(3), jnp.float32(0)).tolist() == [2.0, 2.0, 2.0]
    assert len(compiled) == 1
    assert distributed.run_compiled(program, compiled, jnp.arange(2), jnp.int32(1)).tolist() == [1, 3]
    assert len(compiled) == 2
