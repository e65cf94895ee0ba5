"""One rank of tests/parallel/test_distributed_fsdp.py: FSDP2 (`fully_shard`) and DTensor on jax tensors over the
"jax" process-group backend, with jax.distributed initialized too (so both routes run: gloo on host
copies, and XLA collectives). Prints one RESULT line of JSON."""

import datetime
import faulthandler
import json
import os
import time
import warnings

import jax
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

import jaxdev
from jaxdev.graphs import program
from jaxdev.parallel import distributed as jd

LAUNCHED = float(os.environ.get("RANK_LAUNCHED", time.time()))
# a hang shows where: stacks and exit at HANG_S seconds after the launch
faulthandler.dump_traceback_later(
    max(1.0, float(os.environ.get("HANG_S", "600")) - (time.time() - LAUNCHED)), exit=True
)
rank = int(os.environ["DDP_RANK"])
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(
    f"127.0.0.1:{os.environ['JAX_PORT']}", num_processes=2, process_id=rank, initialization_timeout=60
)
dist.init_process_group(
    "jax",
    init_method=f"tcp://127.0.0.1:{os.environ['DDP_PORT']}",
    rank=rank,
    world_size=2,
    timeout=datetime.timedelta(seconds=90),
)
pg = dist.group.WORLD
out = {"xla_available": pg.via == "xla"}
xla_kinds = []
_run = jd._XlaCollectives.run
jd._XlaCollectives.run = lambda self, t, kind, *a: (xla_kinds.append(kind), _run(self, t, kind, *a))[1]
host_calls = []
_host = jd.JaxProcessGroup._run
jd.JaxProcessGroup._run = lambda self, method, *a: (host_calls.append(method), _host(self, method, *a))[1]


def functional(via):
    """The functional collectives on jax tensors (DTensor's redistributions call them)."""
    pg.via = via
    x = torch.arange(6.0, device="jax").view(3, 2) + 10 * rank
    out[via + "_gather"] = funcol.all_gather_tensor(x, 0, pg).cpu().tolist()
    y = torch.arange(8.0, device="jax").view(4, 2) * (rank + 1)
    out[via + "_scatter_sum"] = funcol.reduce_scatter_tensor(y, "sum", 0, pg).cpu().tolist()
    out[via + "_scatter_avg"] = funcol.reduce_scatter_tensor(y, "avg", 0, pg).cpu().tolist()
    out[via + "_all_reduce_avg"] = funcol.all_reduce(y[0], "avg", pg).cpu().tolist()
    into = torch.zeros(2, 3, 2, device="jax")  # the stacked output form
    dist.all_gather_into_tensor(into, x)
    out[via + "_gather_stacked"] = into.cpu().tolist()


def dtensor():
    mesh = init_device_mesh("jax", (2,))
    torch.manual_seed(0)
    a, b = torch.randn(8, 6), torch.randn(6, 4)
    s0 = distribute_tensor(a.to("jax"), mesh, [Shard(0)])
    s1 = distribute_tensor(a.to("jax"), mesh, [Shard(1)])
    b_rep = distribute_tensor(b.to("jax"), mesh, [Replicate()])
    b_s0 = distribute_tensor(b.to("jax"), mesh, [Shard(0)])
    partial = s1 @ b_s0  # Partial(sum): each rank's product of its halves
    cases = {
        "distribute": (s0, a),
        "matmul_shard_replicate": (s0 @ b_rep, a @ b),
        "matmul_partial": (partial, a @ b),
        "partial_to_shard": (partial.redistribute(mesh, [Shard(0)]), a @ b),
        "shard0_to_shard1": (s0.redistribute(mesh, [Shard(1)]), a),
        "shard_to_replicate": (s1.redistribute(mesh, [Replicate()]), a),
        "sum": (s0.sum(), a.sum()),
        "elementwise": (torch.relu(s0) * 2 + 1, torch.relu(a) * 2 + 1),
    }
    out["dtensor"] = {
        name: [
            (t.full_tensor().cpu() - ref).abs().max().item(),
            t.to_local().device.type,
            [str(p) for p in t.placements],
        ]
        for name, (t, ref) in cases.items()
    }
    out["dtensor_local_shape"] = list(s0.to_local().shape)
    # compiled: the all-gather of the redistribution runs inside the graph's one XLA program
    programs = program.STATS.programs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = torch.compile(
            lambda x, w: (
                torch.relu(x @ w).redistribute(mesh, [Replicate()]).to_local() * 2,
                x.redistribute(mesh, [Shard(1)]),
            ),
            backend="jax",
        )
        got, s1_again = fn(s0, b_rep)  # Shard(0) -> Shard(1): DTensor's all-to-all
    out["dtensor_compiled"] = {
        "error": (got.cpu() - torch.relu(a @ b) * 2).abs().max().item(),
        "shard0_to_shard1_error": (s1_again.to_local().cpu() - a[:, 3 * rank : 3 * rank + 3]).abs().max().item(),
        "programs": program.STATS.programs - programs,
        "op_by_op": [str(w.message) for w in caught if "runs op by op" in str(w.message)],
    }


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def block():
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)


torch.manual_seed(1)
DATA = {
    "mlp": (torch.randn(8, 16), torch.randint(0, 4, (8,))),
    "block": (torch.randn(4, 5, 16), torch.randn(4, 5, 16)),
}


def loss_of(kind, model, x, y):
    if kind == "mlp":
        return torch.nn.functional.cross_entropy(model(x), y)
    return torch.nn.functional.mse_loss(model(x), y)


def train(kind, model, optimizer, device, shard):
    """Three steps; with `shard`, this rank's half of the batch and the mean of both ranks' losses."""
    x, y = DATA[kind]
    if shard:
        half = slice(x.shape[0] // 2 * rank, x.shape[0] // 2 * (rank + 1))
        x, y = x[half], y[half]
    x, y = x.to(device), y.to(device)
    opt = (
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        if optimizer == "sgd"
        else torch.optim.AdamW(model.parameters(), lr=0.01)
    )
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = loss_of(kind, model, x, y)
        loss.backward()
        opt.step()
        loss = loss.detach().clone()
        if shard:
            dist.all_reduce(loss)
            loss /= 2
        losses.append(loss.item())
    return losses


def weights(model):
    full = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in model.parameters()]
    return [p.detach().cpu() for p in full]


def fsdp(kind, optimizer, via, compiled=False):
    pg.via = via
    model = {"mlp": mlp, "block": block}[kind]().to("jax")
    # each Linear its own FSDP unit (the block's attention reads out_proj.weight without calling it)
    inner = [model[0], model[2]] if kind == "mlp" else [model.linear1, model.linear2]
    mesh = init_device_mesh("jax", (2,))
    for m in inner:
        fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    out["fsdp_placements"] = str(next(iter(model.parameters())).placements)
    out["fsdp_local_device"] = next(iter(model.parameters())).to_local().device.type
    host_before, xla_before = len(host_calls), len(xla_kinds)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = train(kind, torch.compile(model, backend="jax") if compiled else model, optimizer, "jax", True)
    op_by_op = [str(w.message) for w in caught if "runs op by op" in str(w.message)]
    counts = {"host": host_calls[host_before:], "xla": xla_kinds[xla_before:]}
    # one process on the whole batch: CPU always, jax too for the MLP (the block's many kernels would
    # compile again for the whole batch's shapes: minutes on a loaded 2-core machine)
    references = {}
    for device in ("cpu", "jax") if kind == "mlp" else ("cpu",):
        model_1 = {"mlp": mlp, "block": block}[kind]().to(device)
        references[device] = (train(kind, model_1, optimizer, device, shard=False), weights(model_1))
    tag = f"{kind}_{optimizer}_{via}" + ("_compiled" if compiled else "")
    mine = weights(model)
    out[tag] = {
        "losses": losses,
        **{"losses_" + d: r[0] for d, r in references.items()},
        **{
            "weights_vs_" + d: max((a - b).abs().max().item() for a, b in zip(mine, r[1]))
            for d, r in references.items()
        },
        "host_collectives": sorted(set(counts["host"])),
        "xla_collectives": sorted(set(counts["xla"])),
        "op_by_op": op_by_op,
    }


# wall seconds: from the launch (imports, jax.distributed and process group) and each part
seconds = out["seconds"] = {"start": round(time.time() - LAUNCHED, 1)}


def timed(name, fn, *args, **kwargs):
    begin = time.monotonic()
    fn(*args, **kwargs)
    seconds[name] = round(time.monotonic() - begin, 1)


for via in ("gloo", "xla"):
    timed("functional_" + via, functional, via)
pg.via = "xla"
timed("dtensor", dtensor)
timed("mlp_sgd_gloo", fsdp, "mlp", "sgd", "gloo")
timed("mlp_adamw_xla", fsdp, "mlp", "adamw", "xla")
if os.environ.get("JAXDEV_TEST_FSDP_BLOCK") == "1":
    timed("block_sgd_xla", fsdp, "block", "sgd", "xla")
# the model's graphs compiled; FSDP2's hooks (and their collectives) eager
timed("mlp_sgd_xla_compiled", fsdp, "mlp", "sgd", "xla", compiled=True)

gloo_group = dist.new_group(backend="gloo")
try:
    funcol.all_gather_tensor(torch.ones(2, device="jax"), 0, gloo_group)
    out["gloo_group_error"] = None
except RuntimeError as e:
    out["gloo_group_error"] = str(e)

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    compiled = torch.compile(lambda x: funcol.all_gather_tensor(x * 2, 0, pg) + 1, backend="jax")
    out["compiled_gather"] = compiled(torch.ones(2, device="jax") * rank).cpu().tolist()
out["compiled_op_by_op"] = any("runs op by op" in str(w.message) for w in caught)
out["fallbacks"] = jaxdev.fallback_counts()
dist.destroy_process_group()
print("RESULT" + json.dumps(out), flush=True)
jax.distributed.shutdown()
os._exit(0)  # JAX's atexit clean_up (clear_backends) hung here after shutdown on this machine
