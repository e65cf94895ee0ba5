"""The functional collectives (`torch.ops._c10d_functional`) on jax tensors, eagerly.

DTensor (`redistribute`, `full_tensor`, sharded matmuls) and FSDP2's state-dict paths call
`_c10d_functional::all_gather_into_tensor` and `reduce_scatter_tensor`. PyTorch's C++ kernels for them
(CompositeExplicitAutograd) call `ProcessGroup::all_gather_single` / `reduce_scatter_single`, virtual
methods that the pybind trampoline of Python process groups does not forward to Python
(torch/include/torch/csrc/distributed/c10d/PyProcessGroup.hpp overrides allgather, allreduce,
broadcast, reduce_scatter, all_to_all_single... but not those two), so PyTorch's base implementation
dispatches `c10d::_allgather_base_` on the tensor's device and asks the group for a C++ backend for
`jax`: "No backend type associated with device type jax". Python process groups cannot register one
(`dist.Backend` has no trampoline either).

So jax gets its own kernels for those ops (PrivateUse1, ahead of the composite ones): they resolve
the group by name and call its Python collective (`JaxProcessGroup._allgather_base` /
`_reduce_scatter_base`), synchronously; `wait_tensor` then finds no pending work, as after any
completed collective. `avg` is a sum divided by the group's size (gloo has no AVG).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _resolve_process_group

_REDUCE_OPS = {
    "sum": dist.ReduceOp.SUM,
    "avg": dist.ReduceOp.SUM,  # then divided by the group's size
    "product": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
}


def _group(group_name):
    group = _resolve_process_group(group_name) if isinstance(group_name, str) else group_name
    if not hasattr(group, "_jax_collectives"):
        name = group.name() if hasattr(group, "name") else type(group).__name__
        raise RuntimeError(
            f"Collectives on jax tensors need the 'jax' process-group backend "
            f"(dist.init_process_group('jax', ...)); this group's backend is {name!r}."
        )
    return group


def _reduce_op(reduce_op: str):
    op = _REDUCE_OPS.get(reduce_op.lower())
    if op is None:
        raise RuntimeError(
            f"The reduce op {reduce_op!r} is not supported on jax tensors (sum, avg, product, min, max)."
        )
    return op


def _gather_into(out: torch.Tensor, inp: torch.Tensor, group_size: int, group) -> torch.Tensor:
    if group_size != group.size():
        raise RuntimeError(f"all_gather_into_tensor: group_size {group_size} is not the group's size {group.size()}.")
    group._allgather_base(out, inp.contiguous()).wait()
    return out


def _scatter_into(out: torch.Tensor, inp: torch.Tensor, reduce_op: str, group_size: int, group) -> torch.Tensor:
    if group_size != group.size():
        raise RuntimeError(f"reduce_scatter_tensor: group_size {group_size} is not the group's size {group.size()}.")
    if inp.shape[0] % group_size:
        raise RuntimeError(
            f"reduce_scatter_tensor: the input's first dim ({inp.shape[0]}) is not divisible by the group size "
            f"({group_size})."
        )
    opts = dist.ReduceScatterOptions()
    opts.reduceOp = _reduce_op(reduce_op)
    group._reduce_scatter_base(out, inp.contiguous(), opts).wait()
    if reduce_op.lower() == "avg":
        with torch.no_grad():
            out.div_(group_size)
    return out


def _gathered(inp, group_size):
    return inp.new_empty((inp.shape[0] * group_size, *inp.shape[1:]))


def _scattered(inp, group_size):
    return inp.new_empty((inp.shape[0] // group_size, *inp.shape[1:]))


def all_gather_into_tensor(inp, group_size, group_name):
    return _gather_into(_gathered(inp, group_size), inp, group_size, _group(group_name))


def all_gather_into_tensor_out(inp, group_size, group_name, *, out):
    return _gather_into(out, inp, group_size, _group(group_name))


def all_gather_into_tensor_coalesced(inputs, group_size, group_name):
    group = _group(group_name)
    return [_gather_into(_gathered(t, group_size), t, group_size, group) for t in inputs]


def reduce_scatter_tensor(inp, reduce_op, group_size, group_name):
    return _scatter_into(_scattered(inp, group_size), inp, reduce_op, group_size, _group(group_name))


def reduce_scatter_tensor_out(inp, reduce_op, group_size, group_name, *, out):
    return _scatter_into(out, inp, reduce_op, group_size, _group(group_name))


def reduce_scatter_tensor_coalesced(inputs, reduce_op, group_size, group_name):
    group = _group(group_name)
    return [_scatter_into(_scattered(t, group_size), t, reduce_op, group_size, group) for t in inputs]


KERNELS = {
    "all_gather_into_tensor": all_gather_into_tensor,
    "all_gather_into_tensor_out": all_gather_into_tensor_out,
    "all_gather_into_tensor_coalesced": all_gather_into_tensor_coalesced,
    "reduce_scatter_tensor": reduce_scatter_tensor,
    "reduce_scatter_tensor_out": reduce_scatter_tensor_out,
    "reduce_scatter_tensor_coalesced": reduce_scatter_tensor_coalesced,
}

_LIBRARY = None


def register() -> None:
    """Register the jax kernels of the functional collectives (once)."""
    global _LIBRARY
    if _LIBRARY is not None:
        return
    import torch.distributed._functional_collectives  # defines the ops' Python parts

    _LIBRARY = torch.library.Library("_c10d_functional", "IMPL")
    for name, kernel in KERNELS.items():
        _LIBRARY.impl(name, kernel, "PrivateUse1")
