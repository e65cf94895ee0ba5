"""`torch.distributed` on jax tensors: the process-group backend "jax" (gloo on host copies).

    dist.init_process_group("jax", rank=r, world_size=n, init_method="tcp://127.0.0.1:29500")
    dist.all_reduce(t)                                   # t on jax
    model = DistributedDataParallel(model_on_jax)        # PyTorch's own C++ reducer

This is the first, honest step the design asks for: each collective copies its jax tensors to the
host, runs PyTorch's gloo collective on the copies, and writes the results back into the jax tensors
(`copy_`, so aliases, version counters and the sharding of a sharded storage are kept). It is
correct and slow (two host copies per collective); collectives through JAX itself
(`jax.distributed` + sharded programs, see jaxdev/mesh.py) are the fast route. CPU tensors go to gloo
directly, so one group serves both devices.

PyTorch's Python process groups (`dist.ProcessGroup` subclasses) reach C++ callers such as DDP's
reducer through pybind's trampoline: DDP sees an ordinary process group and ordinary tensors.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future
from torch.futures import Future

from jaxdev.tensor import is_jax

BACKEND = "jax"


def _done(result) -> dist.Work:
    fut = Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


def _flat(tensors):
    for t in tensors:
        if isinstance(t, (list, tuple)):
            yield from _flat(t)
        else:
            yield t


class JaxProcessGroup(dist.ProcessGroup):
    """A process group whose collectives run on host copies through an inner gloo group."""

    def __init__(self, store, rank: int, size: int, timeout):
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
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

    def allreduce(self, tensors, opts=None):
        return self._run("allreduce", tensors, None, opts or dist.AllreduceOptions())

    def allreduce_coalesced(self, tensors, opts=None):
        return self._run("allreduce_coalesced", tensors, None, opts or dist.AllreduceCoalescedOptions())

    def broadcast(self, tensors, opts=None):
        return self._run("broadcast", tensors, None, opts or dist.BroadcastOptions())

    def reduce(self, tensors, opts=None):
        return self._run("reduce", tensors, None, opts or dist.ReduceOptions())

    def allgather(self, output_lists, input_list, opts=None):
        return self._run("allgather", output_lists, input_list, opts or dist.AllgatherOptions())

    def _allgather_base(self, output, input, opts=None):
        return self._run("_allgather_base", output, input, opts or dist.AllgatherOptions())

    def all_gather_single(self, output, input, opts=None):
        return self._run("_allgather_base", output, input, opts or dist.AllgatherOptions())

    def reduce_scatter_single(self, output, input, opts=None):
        return self._run("_reduce_scatter_base", output, input, opts or dist.ReduceScatterOptions())

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        return self.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    def send(self, tensors, dst, tag=0):
        return self._run("send", tensors, None, dst, tag)

    def recv(self, tensors, src, tag=0):
        return self._run("recv", tensors, None, src, tag)

    def reduce_scatter(self, output_list, input_lists, opts=None):
        return self._run("reduce_scatter", output_list, input_lists, opts or dist.ReduceScatterOptions())

    def _reduce_scatter_base(self, output, input, opts=None):
        return self._run("_reduce_scatter_base", output, input, opts or dist.ReduceScatterOptions())

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
    pg = JaxProcessGroup(opts.store, opts.group_rank, opts.group_size, opts.timeout)
    pg._set_group_name(opts.group_id)  # the functional collectives find groups by name
    return pg


def register() -> None:
    """Register the "jax" backend with torch.distributed (and as the default for jax tensors)."""
    if not dist.is_available() or BACKEND in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu", "jax"])
