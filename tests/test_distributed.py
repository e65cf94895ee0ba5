"""torch.distributed on jax tensors (jaxdev/distributed.py): the process-group backend "jax", gloo on
host copies. Two processes on localhost (bounded in time): collectives on jax tensors, and
`DistributedDataParallel` over an MLP on jax matching one process's training within 1e-5."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import pytest
import torch.distributed as dist
from jaxdev_testing import ROOT

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built")

RANK = r"""
import datetime, json, os
import torch, jaxdev
import torch.distributed as dist

rank, port = int(os.environ["DDP_RANK"]), os.environ["DDP_PORT"]
dist.init_process_group(
    "jax", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=90)
)
assert dist.get_backend() == "jax"
out = {}

t = torch.tensor([1.0, 2.0, -3.0], device="jax") * (rank + 1)
view = t[1:]  # an alias: it must see the reduced values
dist.all_reduce(t)
out["all_reduce"] = t.cpu().tolist()
out["alias"] = view.cpu().tolist()
m = torch.tensor([4, -7], device="jax") * (rank + 1)
dist.all_reduce(m, op=dist.ReduceOp.MAX)
out["all_reduce_max_int"] = [m.dtype == torch.int64] + m.cpu().tolist()
b = torch.arange(4.0, device="jax") + 10 * rank
dist.broadcast(b, src=1)
out["broadcast"] = b.cpu().tolist()
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
ddp = torch.nn.parallel.DistributedDataParallel(make_model().to("jax"))
half = slice(32 * rank, 32 * (rank + 1))
out["ddp"] = train(ddp, X[half].to("jax"), Y[half].to("jax"), reduce=True)
out["weights"] = ddp.module[0].weight.detach().cpu().sum().item()
out["fallbacks"] = jaxdev.fallback_counts()
dist.destroy_process_group()
print("RESULT" + json.dumps(out), flush=True)
"""


@pytest.fixture(scope="module")
def ranks():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    procs = []
    for rank in range(2):
        env = dict(os.environ)
        env.update(
            PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")]),
            JAXDEV_FALLBACK="error",
            DDP_RANK=str(rank),
            DDP_PORT=port,
        )
        out = tempfile.TemporaryFile()  # noqa: SIM115  (a file, not a pipe: a rank never blocks on it)
        p = subprocess.Popen([sys.executable, "-c", RANK], env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        procs.append((p, out))
    results = []
    deadline = time.monotonic() + 150
    for p, out in procs:
        try:
            code = p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            code = p.wait()
        out.seek(0)
        text = out.read().decode(errors="replace")
        out.close()
        lines = [line for line in text.splitlines() if line.startswith("RESULT")]
        results.append((code, text, lines))
    for code, text, lines in results:
        assert code == 0 and lines, f"exit {code}:\n" + "\n".join(text.splitlines()[-25:])
    return [json.loads(lines[-1][len("RESULT") :]) for _, _, lines in results]


def test_collectives_on_jax_tensors(ranks):
    for rank, r in enumerate(ranks):
        assert r["all_reduce"] == [3.0, 6.0, -9.0]
        assert r["alias"] == [6.0, -9.0]
        assert r["all_reduce_max_int"] == [True, 8, -7]
        assert r["broadcast"] == [10.0, 11.0, 12.0, 13.0]
        assert r["all_gather"] == [[0.0, 0.5], [1.0, 1.5]]
        assert r["all_gather_into_tensor"] == [0.0, 0.5, 1.0, 1.5]
        assert r["reduce_scatter_tensor"] == [[0.0, 3.0], [6.0, 9.0]][rank]
        assert r["cpu_all_reduce"] == [3.0]
        assert r["funcol"] == [6.0, 12.0, -18.0]  # the functional collectives, eagerly
        # inside torch.compile(backend="jax") they are not lowered: that graph runs op by op
        assert r["funcol_compiled"] == [13.0, 25.0, -35.0] and r["funcol_compiled_eager"]
        assert r["fallbacks"] == {}, rank
    assert ranks[1]["recv"] == [7.0, 8.0]


def test_ddp_matches_one_process(ranks):
    for r in ranks:
        assert max(abs(a - b) for a, b in zip(r["ddp"], r["reference"])) < 1e-5, r
    assert ranks[0]["ddp"] == ranks[1]["ddp"]
    assert ranks[0]["weights"] == ranks[1]["weights"]  # the replicas stayed identical
