"""The functional collectives inside a compiled program: one SPMD XLA program per graph and rank.

A graph captured from code that calls `torch.distributed._functional_collectives` (a DDP-style step
that all-reduces its gradients, DTensor's redistributions, FSDP2's all-gathers) holds nodes of
`torch.ops._c10d_functional` (`all_reduce`, `all_gather_into_tensor`, `reduce_scatter_tensor`, ...
each followed by `wait_tensor`). Where their process group takes the XLA route (jaxdev/distributed.py:
`jax.distributed` spans exactly the group's processes, in rank order), the graph's program becomes a
`shard_map` over the group's 1-D mesh, one device per process, axis "ranks": every rank runs the same
program on its own arrays, which enter as its block of global arrays (no copy), and the collectives
become XLA's (`psum`, `all_gather`, `psum_scatter`, `all_to_all`, ...) inside it; `wait_tensor` is the identity.
So a compiled step with collectives is one XLA program per rank, as without them.

Elsewhere (a gloo-route group, a group that is not the whole jax.distributed world, a mesh set with
`jaxdev.set_mesh`, a collective with no lowering here) the graph runs op by op, its collectives
eagerly, with one warning that says why. Every rank compiles the same graph: the same shapes on
every rank, as the collectives themselves need.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from jaxdev import mesh, tensor
from jaxdev.compiler.inputs import UntraceableGraph

AXIS = "ranks"
_NAMESPACE = "_c10d_functional"
_ROUTE = (
    "its process group takes the gloo route (host copies: jax.distributed does not span exactly the "
    "group's processes, or JAXDEV_COLLECTIVES=gloo), so its collectives run eagerly"
)


def is_collective(target) -> bool:
    """A functional collective, or DTensor's Shard(i) -> Shard(j) all-to-all."""
    return isinstance(target, torch._ops.OpOverload) and (
        target.namespace == _NAMESPACE or target.name() == "_dtensor::shard_dim_alltoall"
    )


def _group_name(node: torch.fx.Node):
    names = [a.name for a in node.target._schema.arguments]
    if "group_name" not in names:
        return None
    i = names.index("group_name")
    return node.args[i] if i < len(node.args) else node.kwargs.get("group_name")


def _xla_route(node: torch.fx.Node):
    """The XLA collectives of the node's group, or UntraceableGraph saying why the graph runs eagerly."""
    from torch._C._distributed_c10d import _resolve_process_group

    name = _group_name(node)
    group = _resolve_process_group(name) if isinstance(name, str) else name
    if not hasattr(group, "_jax_collectives"):
        raise UntraceableGraph(node, "its process group is not of the 'jax' backend, so it runs eagerly")
    if group.via != "xla" or group.size() != jax.process_count():
        raise UntraceableGraph(node, _ROUTE)
    return group._xla


def plan(gm: torch.fx.GraphModule) -> Spmd | None:
    """The SPMD form of a graph with collectives (None: it has none); UntraceableGraph where it cannot have one."""
    xla = None
    for node in gm.graph.nodes:
        if node.op != "call_function" or not is_collective(node.target):
            continue
        if node.target._opname not in _LOWERINGS:
            raise UntraceableGraph(node, "this collective has no XLA lowering in jaxdev, so it runs eagerly")
        if node.target._opname != "wait_tensor":
            xla = _xla_route(node)
    if xla is None:
        return None
    if mesh.get_mesh() is not None:
        raise UntraceableGraph(None, "collectives of a process group under jaxdev.set_mesh's mesh run eagerly")
    return Spmd(xla)


class Spmd:
    """A traced program `fn(arrays, base) -> outputs` run as a shard_map over the group's 1-D mesh: each
    rank's arrays enter as its blocks of global arrays and its results leave as its blocks."""

    def __init__(self, xla):
        self.device = xla.device
        self.size = xla.size
        self.sharding = NamedSharding(xla.stacked.mesh, PartitionSpec(AXIS))

    def jit(self, fn):
        """`fn` as this mesh's program. Scalars travel as (1,) blocks (a block has a leading dim)."""
        scalars_in: list[bool] = []
        scalars_out: list[bool] = []

        def body(arrays, base):
            outs = fn([a.reshape(()) if s else a for a, s in zip(arrays, scalars_in)], base)
            leaves, tree = jax.tree.flatten(outs)
            scalars_out[:] = [jnp.ndim(x) == 0 for x in leaves]
            return jax.tree.unflatten(tree, [jnp.reshape(x, (1,)) if jnp.ndim(x) == 0 else x for x in leaves])

        spec = PartitionSpec(AXIS)
        program = jax.jit(jax.shard_map(body, mesh=self.sharding.mesh, in_specs=spec, out_specs=spec, check_vma=False))

        def run(arrays, base):
            if not scalars_in:
                scalars_in[:] = [jnp.ndim(a) == 0 for a in arrays]
            outs = program(self._global(arrays), self._global([jnp.asarray(base)])[0])
            leaves, tree = jax.tree.flatten(outs)
            local = [x.addressable_data(0) for x in leaves]
            return jax.tree.unflatten(tree, [x.reshape(()) if s else x for x, s in zip(local, scalars_out)])

        return run

    def _global(self, arrays) -> list:
        local = jax.device_put([a.reshape((1,)) if a.ndim == 0 else a for a in arrays], self.device)
        return [
            jax.make_array_from_single_device_arrays((self.size * a.shape[0], *a.shape[1:]), self.sharding, [a])
            for a in local
        ]


# --- the lowerings: traced jax tensors in, traced jax tensors out ----------------------------------


def _array(t: torch.Tensor):
    return tensor.read(t)


def _all_reduce_array(x, op: str, size: int):
    op = op.lower()
    if op == "sum":
        return lax.psum(x, AXIS)
    if op == "avg":
        return _avg(lax.psum(x, AXIS), size)
    if op == "max":
        return lax.pmax(x, AXIS)
    if op == "min":
        return lax.pmin(x, AXIS)
    if op == "product":
        return jnp.prod(lax.all_gather(x, AXIS), axis=0).astype(x.dtype)
    raise RuntimeError(f"the reduce op {op!r} has no XLA lowering")


def _size(group_size: int) -> int:
    size = lax.axis_size(AXIS)
    if group_size != size:
        raise RuntimeError(f"group_size {group_size} is not the group's size {size}")
    return size


def all_reduce(t, op, group_name):
    return tensor.wrap(_all_reduce_array(_array(t), op, lax.axis_size(AXIS)))


def all_reduce_coalesced(ts, op, group_name):
    return [all_reduce(t, op, group_name) for t in ts]


def all_gather_into_tensor(t, group_size, group_name):
    _size(group_size)
    return tensor.wrap(lax.all_gather(_array(t), AXIS, axis=0, tiled=True))


def all_gather_into_tensor_coalesced(ts, group_size, group_name):
    return [all_gather_into_tensor(t, group_size, group_name) for t in ts]


def reduce_scatter_tensor(t, op, group_size, group_name):
    size = _size(group_size)
    x = _array(t)
    if x.shape[0] % size:
        raise RuntimeError(f"the input's first dim ({x.shape[0]}) is not divisible by the group size ({size})")
    if op.lower() in ("sum", "avg"):
        out = lax.psum_scatter(x, AXIS, scatter_dimension=0, tiled=True)
        return tensor.wrap(out if op.lower() == "sum" else _avg(out, size))
    block = x.shape[0] // size
    reduced = _all_reduce_array(x, op, size)
    return tensor.wrap(lax.dynamic_slice_in_dim(reduced, lax.axis_index(AXIS) * block, block, 0))


def _avg(x, size):
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        raise RuntimeError("avg of an integer tensor has no XLA lowering")
    return x / jnp.asarray(size, x.dtype)


def reduce_scatter_tensor_coalesced(ts, op, group_size, group_name):
    return [reduce_scatter_tensor(t, op, group_size, group_name) for t in ts]


def broadcast(t, src, group_name):
    return tensor.wrap(lax.all_gather(_array(t), AXIS)[src])


def all_to_all_single(t, output_split_sizes, input_split_sizes, group_name):
    size = lax.axis_size(AXIS)
    even = [t.shape[0] // size] * size
    if t.shape[0] % size or any(s is not None and list(s) != even for s in (output_split_sizes, input_split_sizes)):
        raise RuntimeError("all_to_all_single with uneven splits has no XLA lowering")
    return tensor.wrap(lax.all_to_all(_array(t), AXIS, 0, 0, tiled=True))


def shard_dim_alltoall(t, gather_dim, shard_dim, group_name):
    """Rank r's block r along `shard_dim` of every rank's tensor, joined along `gather_dim`."""
    x = _array(t)
    if x.shape[shard_dim] % lax.axis_size(AXIS):
        raise RuntimeError("shard_dim_alltoall of a dim the group's size does not divide has no XLA lowering")
    return tensor.wrap(lax.all_to_all(x, AXIS, shard_dim, gather_dim, tiled=True))


def wait_tensor(t):
    return t  # the collective completed inside the program


_LOWERINGS = {
    f.__name__: f
    for f in (
        all_reduce,
        all_reduce_coalesced,
        all_gather_into_tensor,
        all_gather_into_tensor_coalesced,
        reduce_scatter_tensor,
        reduce_scatter_tensor_coalesced,
        broadcast,
        all_to_all_single,
        shard_dim_alltoall,
        wait_tensor,
    )
}


def lower(target, args, kwargs):
    """The node's collective on traced tensors, inside the program's shard_map."""
    return _LOWERINGS[target._opname](*args, **kwargs)
