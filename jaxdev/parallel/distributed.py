"""`torch.distributed` on jax tensors: the process-group backend "jax".

    dist.init_process_group("jax", rank=r, world_size=n, init_method="tcp://127.0.0.1:29500")
    dist.all_reduce(t)                                   # t on jax
    model = DistributedDataParallel(model_on_jax)        # PyTorch's own C++ reducer

Two routes, both exact:
* gloo on host copies (always available; every collective): the jax tensors are copied to the
  host, PyTorch's gloo collective runs on the copies, and the results are written back into the jax
  tensors (`copy_`, so aliases, version counters and the sharding of a sharded storage are kept).
  Correct and slow: two host copies per collective.
* XLA collectives (all_reduce with SUM/MAX/MIN/PRODUCT, broadcast) when `jax.distributed` was
  initialized over the same processes in rank order: each process's array becomes one shard of a
  global array over one device per process, and one jitted reduction returns the result on every
  process, with no host copy (`JaxProcessGroup.via == "xla"`; JAXDEV_COLLECTIVES=gloo forces gloo).
CPU tensors go to gloo directly, so one group serves both devices.

PyTorch's Python process groups (`dist.ProcessGroup` subclasses) reach C++ callers such as DDP's
reducer through pybind's trampoline: DDP sees an ordinary process group and ordinary tensors.
"""

from __future__ import annotations

import functools
import itertools
import os

import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.distributed as dist
from jax._src import distributed as jax_processes  # its global_state.client: no public accessor
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from torch._C._distributed_c10d import AllgatherOptions, _create_work_from_future
from torch.futures import Future

from jaxdev import tensor
from jaxdev.tensor import is_jax
from jaxdev.tracing import tracing_now

BACKEND = "jax"


def _done(result) -> dist.Work:
    fut = Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


def _eager_only() -> None:
    """Collectives run eagerly: inside a traced program (torch.compile's graphs) every process would
    have to trace the same collectives in the same order; the compiler runs such a graph op by op."""
    if tracing_now():
        raise RuntimeError("a collective of the 'jax' process group runs eagerly, not inside a traced program")


def _flat(tensors):
    for t in tensors:
        if isinstance(t, (list, tuple)):
            yield from _flat(t)
        else:
            yield t


_BARRIERS = itertools.count()  # this process's compile barriers, numbered alike on every process


def run_compiled(program, compiled: dict, *args):
    """`program(*args)` (a jitted program with cross-process collectives) for the processes of
    `jax.distributed`: compiled first for each new argument signature, then a barrier of all the
    processes, then run. XLA's CPU collectives (gloo) give up on a peer that reaches a collective
    over 30 s after the first (jax-ml/jax#40831), and a process still compiling the program is such
    a peer: the barrier makes every process start the program only once all have compiled it."""
    leaves = jax.tree.leaves(args)
    key = tuple((a.shape, a.dtype, getattr(a, "sharding", None)) for a in leaves)
    executable = compiled.get(key)
    if executable is None:
        executable = program.lower(*args).compile()
        client = jax_processes.global_state.client
        if client is not None:
            # 30 min, torch.distributed's default timeout: a slow compile is not an error
            client.wait_at_barrier(f"jaxdev-compiled-{next(_BARRIERS)}", 30 * 60 * 1000)
        compiled[key] = executable
    return executable(*args)


_REDUCERS = {"SUM": jnp.sum, "MAX": jnp.max, "MIN": jnp.min, "PRODUCT": jnp.prod, "AVG": jnp.mean}


class _XlaCollectives:
    """all_reduce, broadcast, all_gather_into_tensor and reduce_scatter_tensor of jax tensors as XLA
    programs over one device per process: for when `jax.distributed` spans exactly this group's
    processes, in rank order. No host copies: the tensors' arrays form one global array sharded over
    the processes, combined by XLA's collectives (gloo between CPU processes, NCCL between GPUs)."""

    def __init__(self, size: int):
        first: dict[int, jax.Device] = {}
        for d in jax.devices():
            first.setdefault(d.process_index, d)
        self.device = jax.local_devices()[0]
        mesh = Mesh(np.array([first[p] for p in range(size)]), ("ranks",))
        self.stacked = NamedSharding(mesh, PartitionSpec("ranks"))
        self.replicated = NamedSharding(mesh, PartitionSpec())
        self.size = size
        self._programs: dict = {}
        self._compiled: dict = {}

    @staticmethod
    def available(rank: int, size: int) -> bool:
        return size > 1 and jax.process_count() == size and jax.process_index() == rank

    def reducer(self, op, dtype: torch.dtype) -> str | None:
        name = next((n for n in _REDUCERS if op == getattr(dist.ReduceOp, n)), None)
        return None if name == "AVG" and not dtype.is_floating_point else name

    def _program(self, kind, arg):
        key = (kind, arg)
        if key not in self._programs:
            out = self.replicated
            if kind == "reduce":
                fn = functools.partial(_REDUCERS[arg], axis=0)
            elif kind == "broadcast":
                fn = lambda g: g[arg]  # from rank `arg`
            elif kind == "gather":
                fn = lambda g: g.reshape(-1)  # every rank's values, in rank order
            else:  # "scatter": reduced, and each rank keeps its block
                reduce = _REDUCERS[arg]
                fn = lambda g: reduce(g, axis=0).reshape(self.size, -1)
                out = self.stacked
            self._programs[key] = jax.jit(fn, out_shardings=out)
        return self._programs[key]

    def run(self, t: torch.Tensor, kind: str, arg, source: torch.Tensor | None = None) -> None:
        """`t` <- the collective `kind` over every rank's `source` (default: `t` itself)."""
        source = t if source is None else source
        local = jax.device_put(tensor.read(source), self.device)[None]
        stacked = jax.make_array_from_single_device_arrays((self.size, *source.shape), self.stacked, [local])
        compiled = self._compiled.setdefault((kind, arg), {})
        result = run_compiled(self._program(kind, arg), compiled, stacked).addressable_data(0)
        with torch.no_grad():
            t.copy_(tensor.wrap(result.reshape(tuple(t.shape))))


class JaxProcessGroup(dist.ProcessGroup):
    """A process group for jax (and CPU) tensors: gloo on host copies, or, for all_reduce and
    broadcast when `jax.distributed` spans the group's processes, XLA collectives (`via`)."""

    _jax_collectives = True  # the functional collectives' jax kernels take this group

    def __init__(self, store, rank: int, size: int, timeout):
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
        self._xla = _XlaCollectives(size) if _XlaCollectives.available(rank, size) else None
        # "xla" or "gloo"; JAXDEV_COLLECTIVES=gloo forces the host copies.
        self.via = "xla" if self._xla is not None and os.environ.get("JAXDEV_COLLECTIVES") != "gloo" else "gloo"
        # Registered for CPU only, so that PyTorch can name the group (the name lives on backends; the
        # functional collectives resolve groups by name). Jax tensors never reach gloo directly.
        self._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, self._gloo)

    def getBackendName(self) -> str:  # PyTorch's method name
        return BACKEND

    @property
    def _device_types(self):
        return [torch.device("cpu"), torch.device("jax")]

    # Each collective: host copies of the jax tensors, gloo on them, written back into the outputs.
    def _run(self, method, outputs, inputs, *args):
        _eager_only()
        jax_tensors = {id(t) for t in _flat([outputs, inputs]) if is_jax(t)}

        def host(x):
            if isinstance(x, (list, tuple)):
                return [host(t) for t in x]
            return x.detach().cpu() if id(x) in jax_tensors else x

        host_out = host(outputs)
        host_in = host_out if inputs is outputs else host(inputs)
        if inputs is None:
            getattr(self._gloo, method)(host_out, *args).wait()
        else:
            getattr(self._gloo, method)(host_out, host_in, *args).wait()
        for t, h in zip(_flat([outputs]), _flat([host_out])):
            if id(t) in jax_tensors:
                with torch.no_grad():
                    t.copy_(h)
        return _done(outputs)

    def _through_xla(self, tensors) -> bool:
        _eager_only()
        return self.via == "xla" and all(is_jax(t) for t in tensors)

    def allreduce(self, tensors, opts=None):
        opts = opts or dist.AllreduceOptions()
        if self._through_xla(tensors) and (name := self._xla.reducer(opts.reduceOp, tensors[0].dtype)) is not None:
            for t in tensors:
                self._xla.run(t, "reduce", name)
            return _done(tensors)
        return self._run("allreduce", tensors, None, opts)

    def allreduce_coalesced(self, tensors, opts=None):
        return self._run("allreduce_coalesced", tensors, None, opts or dist.AllreduceCoalescedOptions())

    def broadcast(self, tensors, opts=None):
        opts = opts or dist.BroadcastOptions()
        if self._through_xla(tensors) and opts.rootTensor == 0:
            for t in tensors:
                self._xla.run(t, "broadcast", opts.rootRank)
            return _done(tensors)
        return self._run("broadcast", tensors, None, opts)

    def reduce(self, tensors, opts=None):
        return self._run("reduce", tensors, None, opts or dist.ReduceOptions())

    def allgather(self, output_lists, input_list, opts=None):
        return self._run("allgather", output_lists, input_list, opts or AllgatherOptions())

    def _allgather_base(self, output, input, opts=None):
        if self._through_xla([output, input]) and output.numel() == input.numel() * self.size():
            self._xla.run(output, "gather", None, input)
            return _done(output)
        if output.dim() == input.dim() + 1 and output.is_contiguous():  # the stacked form: gloo takes
            self._run("_allgather_base", output.view(-1, *input.shape[1:]), input, opts or AllgatherOptions())
            return _done(output)  # the concatenated form only
        return self._run("_allgather_base", output, input, opts or AllgatherOptions())

    def all_gather_single(self, output, input, opts=None):  # FSDP2's all-gather
        return self._allgather_base(output, input, opts)

    def reduce_scatter_single(self, output, input, opts=None):  # FSDP2's reduce-scatter
        return self._reduce_scatter_base(output, input, opts)

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        return self.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    def send(self, tensors, dst, tag=0):
        return self._run("send", tensors, None, dst, tag)

    def recv(self, tensors, src, tag=0):
        return self._run("recv", tensors, None, src, tag)

    def reduce_scatter(self, output_list, input_lists, opts=None):
        return self._run("reduce_scatter", output_list, input_lists, opts or dist.ReduceScatterOptions())

    def _reduce_scatter_base(self, output, input, opts=None):
        opts = opts or dist.ReduceScatterOptions()
        if (
            self._through_xla([output, input])
            and input.numel() == output.numel() * self.size()
            and (name := self._xla.reducer(opts.reduceOp, input.dtype)) is not None
        ):
            self._xla.run(output, "scatter", name, input)
            return _done(output)
        return self._run("_reduce_scatter_base", output, input, opts)

    def gather(self, output_lists, input_list, opts=None):
        return self._run("gather", output_lists, input_list, opts or dist.GatherOptions())

    def scatter(self, output_list, input_lists, opts=None):
        return self._run("scatter", output_list, input_lists, opts or dist.ScatterOptions())

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        return self._run(
            "alltoall_base", output, input, output_split_sizes, input_split_sizes, opts or dist.AllToAllOptions()
        )

    def barrier(self, opts=None):
        self._gloo.barrier(opts or dist.BarrierOptions()).wait()
        return _done([])


def _create(opts, backend_options=None):
    from jaxdev.parallel import functional_collectives

    functional_collectives.register()  # DTensor's and FSDP2's functional collectives on jax tensors
    pg = JaxProcessGroup(opts.store, opts.group_rank, opts.group_size, opts.timeout)
    pg._set_group_name(opts.group_id)  # the functional collectives find groups by name
    return pg


def register() -> None:
    """Register the "jax" backend with torch.distributed (and as the default for jax tensors)."""
    if not dist.is_available() or BACKEND in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu", "jax"])
