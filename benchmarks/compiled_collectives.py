"""Functional collectives inside compiled programs (jaxdev/parallel/compiled_collectives.py): two processes on
localhost, jax.distributed + the "jax" process group (XLA route). Per training step of an MLP
16-32-4 on each rank's half of a batch of 8, for

* a DDP-style step compiled whole: gradients by `torch.func.grad_and_value`, their
  `funcol.all_reduce(avg)`, the SGD update;
* a SimpleFSDP-style step: Shard(0) DTensor parameters gathered for use (`redistribute` to
  Replicate, gradients reduce-scattered as Partial(avg)), `loss.backward()`, SGD with momentum;

it prints the XLA programs and graph calls per compiled step, the losses and weights against the same
step run eagerly and against one process on the whole batch (CPU), and step times interleaved in one
process: eager, compiled, compiled with the collectives' lowering off (the graph op by op, as before
the lowering existed) and the same step compiled without its all_reduces (DDP-style only).

    python benchmarks/compiled_collectives.py [--steps 20]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import warnings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    if os.environ.get("BENCH_RANK") is not None:
        return rank_main(args.steps)
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(str(s.getsockname()[1]))
    procs = []
    for rank in range(2):
        env = dict(os.environ, BENCH_RANK=str(rank), DDP_PORT=ports[0], JAX_PORT=ports[1])
        procs.append(
            subprocess.Popen(
                [sys.executable, __file__, "--steps", str(args.steps)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    for rank, text in enumerate(outputs):
        results = [line[6:] for line in text.splitlines() if line.startswith("BENCH ")]
        if procs[rank].returncode or not results:
            raise SystemExit(f"rank {rank} failed:\n" + "\n".join(text.splitlines()[-30:]))
        if rank == 0:
            for line in results:
                print(json.dumps(json.loads(line)))


def rank_main(steps: int) -> None:
    import jax
    import torch
    import torch.distributed as dist

    rank = int(os.environ["BENCH_RANK"])
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{os.environ['JAX_PORT']}", num_processes=2, process_id=rank)
    dist.init_process_group(
        "jax",
        init_method=f"tcp://127.0.0.1:{os.environ['DDP_PORT']}",
        rank=rank,
        world_size=2,
        timeout=datetime.timedelta(seconds=120),
    )
    warnings.simplefilter("ignore")
    _count_eager_collectives()
    torch.manual_seed(1)
    data = torch.randn(8, 16), torch.randint(0, 4, (8,))
    for report in (ddp_style(rank, data, steps), simple_fsdp(rank, data, steps)):
        print("BENCH " + json.dumps(report), flush=True)
    dist.destroy_process_group()
    jax.distributed.shutdown()
    os._exit(0)


def mlp():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


EAGER_COLLECTIVES = []  # every collective the "jax" group ran eagerly (XLA route or host copies)


def _count_eager_collectives() -> None:
    from jaxdev.parallel import distributed as jd

    for cls, name in ((jd._XlaCollectives, "run"), (jd.JaxProcessGroup, "_run")):
        original = getattr(cls, name)
        setattr(cls, name, lambda self, *a, _f=original, _n=name: (EAGER_COLLECTIVES.append(_n), _f(self, *a))[1])


def _counting(run):
    """`run()` with the programs compiled, graph calls made and eager collectives run during it."""
    from jaxdev.graphs import program

    programs, calls, eager = program.STATS.programs, program.STATS.calls, len(EAGER_COLLECTIVES)
    result = run()
    counts = program.STATS.programs - programs, program.STATS.calls - calls, len(EAGER_COLLECTIVES) - eager
    return result, *counts


def _interleaved(steps: int, fns: dict) -> dict:
    """Median ms per step of each function, called in turn (each synchronised by `.item()`)."""
    times: dict = {name: [] for name in fns}
    for _ in range(steps):
        for name, fn in fns.items():
            began = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - began)
    return {name: round(statistics.median(t) * 1e3, 2) for name, t in times.items()}


def _diff(a, b) -> float:
    return max((x.detach().cpu() - y.detach().cpu()).abs().max().item() for x, y in zip(a, b))


def _agreement(losses, weights, eager, reference) -> dict:
    """How far a run's losses and weights are from eager's and from one CPU process's (each a pair)."""
    return {
        "losses_vs_eager": max(abs(a - b) for a, b in zip(losses, eager[0])),
        "weights_vs_eager": _diff(weights, eager[1]),
        "losses_vs_one_process_cpu": max(abs(a - b) for a, b in zip(losses, reference[0])),
        "weights_vs_one_process_cpu": _diff(weights, reference[1]),
    }


def ddp_style(rank: int, data, steps: int) -> dict:
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    from jaxdev.parallel import compiled_collectives
    from jaxdev.tracing import UntraceableGraph

    world = dist.group.WORLD
    model = mlp().to("jax")

    def loss_fn(params, x, y):
        return torch.nn.functional.cross_entropy(torch.func.functional_call(model, params, (x,)), y)

    def step(params, x, y):
        grads, loss = torch.func.grad_and_value(loss_fn)(params, x, y)
        avg = lambda g: funcol.all_reduce(g, "avg", world)
        return {k: p - 0.1 * avg(grads[k]) for k, p in params.items()}, avg(loss)

    def one_process(params, x, y):
        grads, loss = torch.func.grad_and_value(loss_fn)(params, x, y)
        return {k: p - 0.1 * grads[k] for k, p in params.items()}, loss

    def train(fn, device="jax", shard=True):
        params = {k: p.detach().to(device) for k, p in mlp().named_parameters()}
        x, y = (t[4 * rank : 4 * rank + 4] if shard else t for t in data)
        losses = []
        for _ in range(3):
            params, loss = fn(params, x.to(device), y.to(device))
            losses.append(loss.item())
        return losses, list(params.values())

    compiled = torch.compile(step, backend="jax")
    eager, reference = train(step), train(one_process, "cpu", shard=False)
    (losses, weights), programs, calls, eager_collectives = _counting(lambda: train(compiled))
    plan = compiled_collectives.plan

    def refuse(gm):  # the lowering off: such graphs ran op by op before it
        if plan(gm) is not None:
            raise UntraceableGraph(None, "the collectives' lowering is off (benchmark)")

    compiled_collectives.plan = refuse
    op_by_op = torch.compile(lambda *a: step(*a), backend="jax")
    (_, _), programs_before, calls_before, eager_before = _counting(lambda: train(op_by_op))
    compiled_collectives.plan = plan
    local = torch.compile(one_process, backend="jax")
    params = {k: p.detach().to("jax") for k, p in mlp().named_parameters()}
    x, y = data[0][4 * rank : 4 * rank + 4].to("jax"), data[1][4 * rank : 4 * rank + 4].to("jax")
    times = _interleaved(
        steps,
        {
            "eager": lambda: step(params, x, y)[1].item(),
            "compiled": lambda: compiled(params, x, y)[1].item(),
            "compiled_op_by_op": lambda: op_by_op(params, x, y)[1].item(),
            "compiled_without_collectives": lambda: local(params, x, y)[1].item(),  # what the rank alone costs
        },
    )
    return {
        "case": "ddp_style (torch.func grads + funcol.all_reduce avg + SGD), compiled whole",
        "programs_3_steps": programs,
        "graph_calls_3_steps": calls,
        "programs_3_steps_lowering_off": programs_before,
        "graph_calls_3_steps_lowering_off": calls_before,
        "eager_collectives_3_steps": eager_collectives,
        "eager_collectives_3_steps_lowering_off": eager_before,
        "losses": losses,
        **_agreement(losses, weights, eager, reference),
        "median_ms": times,
        "eager_over_compiled": round(times["eager"] / times["compiled"], 2),
        "op_by_op_over_compiled": round(times["compiled_op_by_op"] / times["compiled"], 2),
    }


def simple_fsdp(rank: int, data, steps: int) -> dict:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("jax", (2,))
    model = mlp().to("jax")

    def step(params, x, y):
        full = {
            k: p.redistribute(mesh, [Replicate()]).to_local(grad_placements=[Partial("avg")]) for k, p in params.items()
        }
        loss = torch.nn.functional.cross_entropy(torch.func.functional_call(model, full, (x,)), y)
        loss.backward()
        return loss.detach()

    def setup(device="jax", shard=True):
        params = {}
        for k, p in mlp().named_parameters():
            p = p.detach().to(device)
            params[k] = torch.nn.Parameter(distribute_tensor(p, mesh, [Shard(0)]) if shard else p)
        x, y = (t[4 * rank : 4 * rank + 4] if shard else t for t in data)
        return params, torch.optim.SGD(params.values(), lr=0.1, momentum=0.9), x.to(device), y.to(device)

    def one_step(fn, params, opt, x, y, shard=True):
        opt.zero_grad()
        if shard:
            loss = fn(params, x, y).clone()
        else:
            loss = torch.nn.functional.cross_entropy(torch.func.functional_call(model, params, (x,)), y)
            loss.backward()
        opt.step()
        if shard:
            dist.all_reduce(loss)
            loss /= 2
        return loss.item()

    def train(fn, device="jax", shard=True, counts=None):
        params, opt, x, y = setup(device, shard)
        losses, *measured = _counting(lambda: [one_step(fn, params, opt, x, y, shard) for _ in range(3)])
        if counts is not None:  # programs, graph calls and eager collectives of the 3 steps alone
            counts.extend(measured)
        return losses, [p.full_tensor() if shard else p for p in params.values()]

    compiled = torch.compile(step, backend="jax")
    eager = train(step)
    counts = []
    losses, weights = train(compiled, counts=counts)
    programs, calls, eager_collectives = counts
    reference = train(None, "cpu", shard=False)  # functional_call: the module's own parameters unused
    state_e, state_c = setup(), setup()
    times = _interleaved(
        steps, {"eager": lambda: one_step(step, *state_e), "compiled": lambda: one_step(compiled, *state_c)}
    )
    return {
        "case": "simple_fsdp (Shard(0) DTensor params gathered, grads reduce-scattered; SGD momentum eager)",
        "programs_3_steps": programs,
        "graph_calls_3_steps": calls,
        "eager_collectives_3_steps": eager_collectives,  # 3: the loss's own all_reduce, outside the step
        "losses": losses,
        **_agreement(losses, weights, eager, reference),
        "median_ms": times,
        "eager_over_compiled": round(times["eager"] / times["compiled"], 2),
    }


if __name__ == "__main__":
    main()
